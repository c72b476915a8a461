"""Plain checks for Exo's IR classes and no field checks for its analysis formulas.

Exo's IR classes are made by ``asdl_adt`` as abstract base classes, so every ``isinstance``
against one that is not the exact class goes through ``ABCMeta``'s virtual-subclass lookup,
though no IR class has a virtual subclass; and every node is made with each field checked
against its declared type. ``plain_ir_checks`` gives those classes the ``isinstance`` of
ordinary classes and field checks that remember the exact types they accepted;
``trusting_formulas`` drops the checks of the formulas Exo's analysis builds from nodes
already checked (the module text of ``overheads`` says what each saves and why it is safe).
"""

from __future__ import annotations

import abc
import typing


class _PlainChecks(abc.ABCMeta):
    """``ABCMeta`` with the ``isinstance`` and ``issubclass`` of ordinary classes: the
    answer from the class's bases alone. Given only to classes with no virtual subclass,
    for which it is the answer ``ABCMeta`` gives, found without its registry and caches."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


def _ir_classes(base: type) -> list[type]:
    """``base``, first, and every class derived from it."""
    found, todo = [], [base]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _unregistered(classes: list[type]) -> bool:
    """True when none of ``classes`` has a virtual subclass registered with it."""
    return all(isinstance(cls, abc.ABCMeta) and not abc._get_dump(cls)[0] for cls in classes)  # type: ignore[attr-defined]  # CPython's private helper


def _remembering(typ: type, convert: bool, seq: bool, opt: bool, error: type):
    """The field check ``asdl_adt`` makes for a field of type ``typ`` (optional when
    ``opt``, a list when ``seq``), remembering the exact types it has accepted: whether an
    object is an instance of an ordinary class depends on its type alone."""
    accepted: set[type] = set()

    def point(obj):
        kind = type(obj)
        if kind in accepted:
            return obj
        if obj is not None:
            if isinstance(obj, typ):
                accepted.add(kind)
                return obj
            if convert:
                return typ(obj)
        raise error(typ, kind)

    def validate(value):
        if value is None and opt:
            return value
        if seq:
            if not isinstance(value, list):
                raise error(list, type(value))
            # a block of statements is checked each time a node holding it is rebuilt:
            # when every item's type was accepted before, the copy is made in C
            if accepted.issuperset(map(type, value)):
                return list(value)
            try:
                return [point(item) for item in value]
            except error as err:
                raise error(list[err.expected], list[err.actual]) from err
        return point(value)

    validate.seq, validate.convert = seq, convert  # type: ignore[attr-defined]  # read by ``trusting_formulas``
    return validate


def _trusting(seq: bool):
    """A field check that checks nothing (``trusting_formulas``): a list field still gets a
    list of its own, as ``asdl_adt`` gives it."""
    if seq:
        return lambda value: value if value is None else list(value)
    return lambda value: value


def _converting_once(check: typing.Callable[[typing.Any], typing.Any]) -> typing.Callable[[typing.Any], typing.Any]:
    """``check`` (a converting field check: an operator given as text becomes Exo's
    operator, a ``str`` subclass) asked once per value: the answer for a text seen before
    is the equal operator made then."""
    made: dict = {}

    def convert(value):
        if type(value) is not str:
            return check(value)
        found = made.get(value)
        if found is None:
            found = made[value] = check(value)
        return found

    return convert


#: The field checks ``trusting_formulas`` replaced: (namespace, name, the check it replaced).
TRUSTED: list[tuple[dict, str, typing.Callable]] = []


def _checked_only_by(check, functions: tuple[typing.Callable, ...]) -> bool:
    """Whether ``check`` is ``asdl_adt``'s check of a single (not list) field by one of
    ``functions``: functions of Exo's own that return the value they are given, or raise."""
    outer = _closure(check)
    return not outer.get("seq", True) and any(outer.get("point_valid") is f for f in functions)


def trusting_formulas(modules: typing.Iterable[object], checks_only: tuple[typing.Callable, ...] = ()) -> int:
    """Drop the field checks of the classes of Exo's analysis formula ``modules`` (``asdl_adt``
    modules: ``new_analysis_core.A``, ``new_eff.LS``, ``new_eff.E``, ``boundscheck.E``) that
    ``plain_ir_checks`` made remembering (see the module text), and those made with one of
    Exo's own ``checks_only`` (``is_type_bound`` of ``new_analysis_core`` and of ``new_eff``:
    a formula's type is a tuple or an IR type); those that convert (an operator's text)
    convert each text once. Returns how many were replaced."""
    from asdl_adt import adt

    count = 0
    for module in modules:
        for cls in vars(module).values():
            if not (isinstance(cls, type) and issubclass(cls, adt._AsdlAdtBase)):
                continue
            namespace = getattr(cls.__dict__.get("__init__"), "__globals__", None)
            if namespace is None or namespace.get("__name__") is not None:
                continue
            for name, check in list(namespace.items()):
                if not name.startswith("_validate_"):
                    continue
                convert = getattr(check, "convert", None)
                if convert is None and _checked_only_by(check, checks_only):
                    replacement = _trusting(False)
                elif convert is None or (convert and check.seq):
                    continue  # Exo's other checks, and lists to convert, stay as they are
                else:
                    replacement = _converting_once(check) if convert else _trusting(check.seq)
                TRUSTED.append((namespace, name, check))
                namespace[name] = replacement
                count += 1
    return count


def _closure(func) -> dict:
    """A function's free variables by name."""
    cells = func.__closure__ or ()
    return {name: cell.cell_contents for name, cell in zip(func.__code__.co_freevars, cells, strict=False)}


def plain_ir_checks() -> bool:
    """Give every ``asdl_adt`` class of this process plain ``isinstance`` checks and
    remembering field checks; False, changing nothing, when a class has a virtual subclass
    or the checks are not shaped as expected."""
    try:
        from asdl_adt import adt, validators
    except ImportError:
        return False
    classes = _ir_classes(adt._AsdlAdtBase)
    if not _unregistered(classes):
        return False
    replacements = []  # (namespace, name, check): all found before any is changed
    for cls in classes:
        init = cls.__dict__.get("__init__")
        namespace = getattr(init, "__globals__", None)
        if namespace is None or namespace.get("__name__") is not None:
            continue  # not an __init__ made by asdl_adt (those run in a namespace of their own)
        for name, check in namespace.items():
            if not name.startswith("_validate_") or check.__qualname__.startswith(_remembering.__name__):
                continue
            outer = _closure(check)
            if set(outer) != {"opt", "point_valid", "seq"}:
                return False
            inner = _closure(outer["point_valid"])
            if set(inner) != {"convert", "typ"} or not isinstance(inner["typ"], type):
                continue  # a field checked by a function of Exo's own: left as it is
            replacements.append(
                (
                    namespace,
                    name,
                    _remembering(
                        inner["typ"], inner["convert"], outer["seq"], outer["opt"], validators.ValidationError
                    ),
                )
            )
    for cls in classes[1:]:
        # not asdl_adt's own base: classes made later inherit its metaclass, and they may
        # yet have virtual subclasses
        cls.__class__ = _PlainChecks
    for namespace, name, check in replacements:
        namespace[name] = check
    return True
