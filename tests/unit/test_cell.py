from tabmem.cell import Cell, cell_params, config_hash, flatten

CFG = {
    "model": {
        "name": "gpt-4",
        "api_key": "sk-secret",
        "api_key_env": "OPENAI_API_KEY",
        "max_tokens": 5,
    },
    "dataset": {"name": "iris", "file": "iris.csv"},
    "test": {"name": "header", "split_rows": [2, 4]},
    "transform": {"name": "original"},
    "seed": 0,
}


def test_flatten_drops_secrets_but_keeps_token_limits():
    flat = flatten(CFG)
    assert "model.api_key" not in flat
    assert flat["model.api_key_env"] == "OPENAI_API_KEY"
    assert flat["model.max_tokens"] == 5
    assert "sk-secret" not in str(flat)


def test_cell_names_and_tags():
    cell = Cell.from_config(CFG)
    assert cell.tags() == {
        "model": "gpt-4",
        "dataset": "iris",
        "test": "header",
        "transform": "original",
    }
    assert cell.run_name == "gpt-4 | iris | header | original"


def test_config_hash_changes_with_any_setting_and_seed():
    base = config_hash(cell_params(CFG))
    assert config_hash(cell_params({**CFG, "seed": 1})) != base
    changed = {**CFG, "test": {"name": "header", "split_rows": [2]}}
    assert config_hash(cell_params(changed)) != base
    assert config_hash(cell_params(dict(CFG))) == base
