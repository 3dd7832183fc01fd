"""Each rule's hyper-parameters are listed once, in rlgrad-optim's tables
(``rlgrad._rlgrad._hyperparameters()``): the constructor reads its keywords, their types
and its errors from them, and these tests hold ``optim.py`` and ``optim.pyi`` to them (the
same keywords in the same order, the table's defaults or None for "the flavor's", the
stub's types), so that neither can drift from the Rust rules."""

import ast
import inspect
import pathlib
import re

import pytest

from rlgrad import optim
from rlgrad._rlgrad import _hyperparameters

TABLES = _hyperparameters()
RULE_CLASSES = [getattr(optim, name) for name in optim.__all__ if name != "Optimizer"]
STUB = pathlib.Path(__file__).resolve().parents[1] / "python" / "rlgrad" / "optim.pyi"


def _rule(cls):
    return cls.__name__.lower()


def _keywords(table):
    """The keywords of a rule's class: its flavor when it has several, its
    hyper-parameters in the table's order, then threads."""
    flavor = ["flavor"] if len(table["flavors"]) > 1 else []
    return flavor + [name for name, _, _ in table["hyperparameters"]] + ["threads"]


def _python_defaults(cls):
    parameters = list(inspect.signature(cls.__new__).parameters.values())
    assert [p.name for p in parameters[:2]] == ["cls", "lr"]
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters[2:])
    return {p.name: p.default for p in parameters[2:]}


def _stub_keywords(class_name):
    tree = ast.parse(STUB.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    new = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__new__")
    return [(a.arg, ast.unparse(a.annotation)) for a in new.args.kwonlyargs]


def test_every_rule_has_its_class():
    assert sorted(_rule(cls) for cls in RULE_CLASSES) == sorted(TABLES)


@pytest.mark.parametrize("cls", RULE_CLASSES, ids=_rule)
def test_a_class_takes_its_rules_keywords_with_the_tables_defaults(cls):
    table = TABLES[_rule(cls)]
    defaults = _python_defaults(cls)
    assert list(defaults) == _keywords(table)
    assert defaults["threads"] is None
    if "flavor" in defaults:
        assert defaults["flavor"] == table["flavors"][0]
    for name, kind, by_flavor in table["hyperparameters"]:
        default = defaults[name]
        if default is None:
            continue  # the default of the flavor chosen
        assert type(default).__name__ == kind, name
        assert set(by_flavor.values()) == {default}, name


@pytest.mark.parametrize("cls", RULE_CLASSES, ids=_rule)
def test_a_class_builds_the_rule_at_each_flavors_defaults(cls):
    table = TABLES[_rule(cls)]
    for flavor in table["flavors"]:
        by_class = cls(1e-3, flavor=flavor) if len(table["flavors"]) > 1 else cls(1e-3)
        by_name = optim.Optimizer(_rule(cls), 1e-3, flavor=flavor)
        assert repr(by_class) == repr(by_name)


@pytest.mark.parametrize("cls", RULE_CLASSES, ids=_rule)
def test_the_stub_of_a_class_has_its_keywords_and_types(cls):
    table = TABLES[_rule(cls)]
    defaults = _python_defaults(cls)
    kinds = {name: kind for name, kind, _ in table["hyperparameters"]}
    expected = []
    for name in _keywords(table):
        if name == "flavor":
            expected.append((name, "str"))
        elif name == "threads":
            expected.append((name, "Optional[int]"))
        elif defaults[name] is None:
            expected.append((name, f"Optional[{kinds[name]}]"))
        else:
            expected.append((name, kinds[name]))
    assert _stub_keywords(cls.__name__) == expected


def test_the_stub_of_optimizer_has_every_hyperparameter():
    kinds = {}
    for table in TABLES.values():
        for name, kind, _ in table["hyperparameters"]:
            assert kinds.setdefault(name, kind) == kind, name
    stub = _stub_keywords("Optimizer")
    assert stub[:2] == [("flavor", "str"), ("threads", "Optional[int]")]
    assert dict(stub[2:]) == {name: f"Optional[{kind}]" for name, kind in kinds.items()}
    assert len(stub[2:]) == len(kinds)


def test_the_constructor_reads_its_keywords_from_the_tables():
    with pytest.raises(TypeError, match="unexpected keyword argument 'betas'"):
        optim.Optimizer("adam", 1e-3, betas=(0.9, 0.99))
    with pytest.raises(ValueError, match=r'`beta1` is not a hyper-parameter of sgd \(it takes \["weight_decay"\]\)'):
        optim.Optimizer("sgd", 1e-3, beta1=0.9)
    with pytest.raises(TypeError):
        optim.Optimizer("adam", 1e-3, amsgrad=1)
    with pytest.raises(TypeError):
        optim.Optimizer("adam", 1e-3, beta1="0.9")
    with pytest.raises(ValueError, match=r"Optimizer: argument `beta1` is invalid: expected a finite value in \[0, 1\)"):
        optim.Optimizer("adam", 1e-3, beta1=1.0)
    with pytest.raises(ValueError, match="is `jax`, expected `torch`, `keras` or `core` for momentum"):
        optim.Optimizer("momentum", 1e-3, flavor="jax")
    with pytest.raises(ValueError, match="is `keras`, expected `torch` for adamw"):
        optim.Optimizer("adamw", 1e-3, flavor="keras")
    with pytest.raises(ValueError, match="is `lion`, expected one of sgd, momentum, adam, adamw, rmsprop, adagrad"):
        optim.Optimizer("lion", 1e-3)
    keras = optim.Optimizer("adam", 1e-3, flavor="keras", eps=None, amsgrad=True)
    assert repr(keras) == repr(optim.Adam(1e-3, flavor="keras", eps=1e-7, amsgrad=True))
    assert "amsgrad" in repr(keras)


# The prose of a class's docstring: what follows "Default(s)" up to the end of the
# sentence (a period before a space or the end, or a closing parenthesis).
_DEFAULTS_PROSE = re.compile(r"[Dd]efaults?:?(.*?)(?:\.(?:\s|$)|\))", re.S)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?")


def _prose_defaults(cls):
    sentences = _DEFAULTS_PROSE.findall(cls.__doc__)
    return {float(n) for sentence in sentences for n in _NUMBER.findall(sentence)}


@pytest.mark.parametrize("cls", RULE_CLASSES, ids=_rule)
def test_the_docstrings_defaults_are_the_tables(cls):
    """The numbers a docstring gives as defaults are defaults of the table (some flavor's),
    and every non-zero numeric default of the table is given (a zero reads "no ...")."""
    table = TABLES[_rule(cls)]
    numbers = {
        float(value)
        for _, kind, by_flavor in table["hyperparameters"]
        if kind == "float"
        for value in by_flavor.values()
    }
    prose = _prose_defaults(cls)
    assert prose <= numbers, f"{cls.__name__}'s docstring gives {sorted(prose - numbers)}"
    missing = {n for n in numbers if n != 0.0} - prose
    assert not missing, f"{cls.__name__}'s docstring omits the defaults {sorted(missing)}"
