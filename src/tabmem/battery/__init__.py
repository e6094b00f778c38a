"""The tests of knowledge, learning and memorization, one module per ``test=`` config."""
