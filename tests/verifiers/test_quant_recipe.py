"""The quant recipe from the untrusted side: a recipe is data from a fixed vocabulary, and
everything else in it (code, import paths, figures it claims, unknown configs or arguments)
is refused by name before anything runs. No sandbox here."""

from __future__ import annotations

import pytest

from assay.errors import UserError
from assay.recipe import CONFIGS, parse_recipe


def parse(text: str):
    return parse_recipe(text.encode(), "recipe.toml")


def test_an_honest_recipe_keeps_its_rules_in_order():
    r = parse(
        """
        description = "blocks int4, head fp32"
        [[rule]]
        match = "head"
        config = "none"
        [[rule]]
        match = "blocks.*"
        config = "intx_weight_only"
        bits = 4
        group_size = 64
        [[rule]]
        match = "*"
        config = "eager_dynamic_int8"
        """
    )
    assert [x["config"] for x in r.plan()] == ["none", "intx_weight_only", "eager_dynamic_int8"]
    assert r.plan()[1] == {"match": "blocks.*", "config": "intx_weight_only", "bits": 4, "group_size": 64}
    assert r.quantizes_anything()


def test_defaults_are_filled_in_so_the_harness_never_guesses():
    r = parse('[[rule]]\nmatch = "*"\nconfig = "int4_weight_only"\n')
    assert r.plan() == [{"match": "*", "config": "int4_weight_only", "group_size": 32}]


@pytest.mark.parametrize(
    "text, words",
    [
        # code, by any name
        (
            '[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\nfilter_fn = "lambda m, n: True"\n',
            "rule 1: filter_fn: unknown key",
        ),
        ('import = "os"\n[[rule]]\nmatch = "*"\nconfig = "none"\n', "import: unknown key"),
        ('[[rule]]\nmatch = "*"\nconfig = "torchao.quantization.Int8WeightOnlyConfig"\n', "unknown config"),
        ("[[rule]]\nmatch = \"*\"\nconfig = \"__import__('os').system('id')\"\n", "unknown config"),
        # figures it would like to have measured
        ('[metrics]\nspeedup = 3.0\n[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\n', "metrics: unknown key"),
        ('[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\ncosine = 1.0\n', "cosine: unknown key"),
        # arguments outside each config's own
        ('[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\ngroup_size = 32\n', "group_size: unknown key"),
        ('[[rule]]\nmatch = "*"\nconfig = "intx_weight_only"\nbits = 9\n', "rule 1: bits"),
        ('[[rule]]\nmatch = "*"\nconfig = "int4_weight_only"\ngroup_size = 256\n', "rule 1: group_size"),
        ('[[rule]]\nmatch = "*"\nconfig = "intx_weight_only"\nbits = "4"\n', "rule 1: bits"),
        ('[[rule]]\nmatch = "*"\n', "rule 1: no config"),
        ('[[rule]]\nconfig = "none"\n', "match"),
        ("description = 'no rules'\n", "rule"),
        ("rule = []\n", "rule"),
        ('[[rule]]\nmatch = "../../etc/*"\nconfig = "int8_weight_only"\n', "characters no module name"),
        ('[[rule]]\nmatch = "a;b"\nconfig = "int8_weight_only"\n', "characters no module name"),
        ('[[rule]\nmatch = "*"\n', "not valid TOML"),
    ],
)
def test_a_recipe_outside_the_vocabulary_is_refused_by_name(text, words):
    with pytest.raises(UserError) as e:
        parse(text)
    assert words in str(e.value), str(e.value)
    assert e.value.fix


def test_an_unknown_config_names_the_vocabulary():
    with pytest.raises(UserError) as e:
        parse('[[rule]]\nmatch = "*"\nconfig = "awq"\n')
    assert all(c in e.value.fix for c in CONFIGS)


def test_size_and_encoding_limits():
    with pytest.raises(UserError, match="over"):
        parse_recipe(b"#" * (65 << 10))
    with pytest.raises(UserError, match="not valid TOML"):
        parse_recipe(b"\xff\xfe[[rule]]")


def test_an_all_none_recipe_quantizes_nothing():
    assert not parse('[[rule]]\nmatch = "*"\nconfig = "none"\n').quantizes_anything()
