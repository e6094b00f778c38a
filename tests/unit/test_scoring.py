from tabmem.stats.scoring import (
    common_prefix_length,
    levenshtein_similarity,
    strip_code_fence,
    verbatim_match,
)

EXPECTED = "0.2,setosa\n4.9,3.0,1.4,0.2,setosa\n4.7,3.2,1.3,0.2,setosa\n"


def test_common_prefix_length_counts_shared_leading_characters():
    assert common_prefix_length("abcdef", "abcxyz") == 3
    assert common_prefix_length("", "abc") == 0
    assert common_prefix_length("abc", "abc") == 3


def test_verbatim_match_counts_whole_rows_only():
    match = verbatim_match(EXPECTED, "0.2,setosa\n4.9,3.0,1.4,0.2,setosa\n4.7,3.9")
    assert match.rows == 2
    assert match.chars == len("0.2,setosa\n4.9,3.0,1.4,0.2,setosa\n4.7,3.")
    assert match.expected_rows == 3


def test_verbatim_match_row_needs_its_line_end_unless_last():
    assert verbatim_match(EXPECTED, "0.2,setosa").rows == 0
    assert verbatim_match(EXPECTED, "0.2,setosa\n").rows == 1
    assert verbatim_match("a,b\nc,d", "a,b\nc,d").rows == 2


def test_verbatim_match_wrong_first_character_scores_nothing():
    match = verbatim_match(EXPECTED, "1.2,setosa\n4.9,3.0,1.4,0.2,setosa\n")
    assert (match.chars, match.rows) == (0, 0)


def test_strip_code_fence_drops_only_a_leading_fence_line():
    assert strip_code_fence("```csv\na,b\n```") == "a,b\n```"
    assert strip_code_fence("a,b") == "a,b"


def test_levenshtein_similarity_known_distance():
    # kitten -> sitting needs 3 edits; normalised by the longer length 7
    assert abs(levenshtein_similarity("kitten", "sitting") - (1 - 3 / 7)) < 1e-12
    assert levenshtein_similarity("abc", "abc") == 1.0


def test_a_not_applicable_result_counts_the_answers_it_could_not_score():
    from tabmem.results import QueryRecord, TestResult, Verdict

    asked = TestResult.not_applicable("t", "nothing to ask", info={"why": 1})
    assert (asked.verdict, asked.n_queries, asked.n_hits, asked.info) == (
        Verdict.NOT_APPLICABLE,
        0,
        0,
        {"why": 1},
    )
    record = QueryRecord(prompt="p", expected="e", completion="", score=0.0, error="timeout")
    failed = TestResult.not_applicable("t", "unscored", records=[record, record])
    assert failed.n_queries == 2 and failed.all_metrics()["n_failed_queries"] == 2
