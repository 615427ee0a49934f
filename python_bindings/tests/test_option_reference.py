"""The flag reference in docs/ is what tools/option_reference.py prints from
the option table: a flag added, renamed or re-documented without
regenerating the file fails here."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_flag_reference_is_current():
    spec = importlib.util.spec_from_file_location(
        "option_reference", os.path.join(ROOT, "tools", "option_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = os.path.join(ROOT, "docs", "reference", "cleave-compile-flags.md")
    with open(path) as f:
        committed = f.read()
    assert committed == module.reference(), (
        "docs/reference/cleave-compile-flags.md is out of date: regenerate it "
        "with tools/option_reference.py")
