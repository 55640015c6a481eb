"""Both ends of a remote call between the trusted test process and the sandboxed candidate: program text.

:mod:`benchmark.sandbox.remote` prepends this file's text to a one-line call of
:func:`serve` (the candidate's side) or :func:`judge` (the tests' side) and runs
each in its own sandbox; importing it does nothing else.

The wire carries plain data only. A message is an 8-byte length then the
``repr`` of a tree made of ``None``, ``bool``, ``int``, finite ``float``, ``str``,
``bytes`` and tagged tuples ``(tag, payload)`` for everything else; the reader
parses it with :func:`ast.literal_eval` (nothing is ever executed or
unpickled) and rebuilds builtin lists, tuples, dicts, sets, non-finite floats,
complex numbers and numpy arrays from it. No object of the candidate crosses:
a value that is not plain data fails its call.
"""

import ast
import os
import sys

MAX_MESSAGE = 64 << 20
"""Largest message (bytes) either side accepts; a bigger reply fails that call. SciCode's image filters (problems
6 and 7) take and return 800x800 arrays: about 25 MB a reply as encoded here."""
_NUMERIC_KINDS = "biufc"  # numpy dtype kinds that are plain numbers (bool, int, uint, float, complex)
# Bound before the candidate's program runs: an honest reply still encodes if the program patches builtins.
isinstance, type, repr, frozenset = isinstance, type, repr, frozenset  # noqa: PLW0127


class RemoteError(Exception):
    """The candidate's call failed in a way no builtin exception describes (or its process ended)."""


class NotPlainData(TypeError):
    """A value that cannot cross the wire (an object with methods of its own, a function, ...)."""


def encode(x, depth=0):
    """``x`` as a literal tree (see the module docstring); raises :class:`NotPlainData`."""
    if depth > 100:
        raise NotPlainData("nested deeper than 100 levels")
    if x is None or type(x) in (bool, int, str, bytes):
        return x
    if type(x) is float:
        return x if x - x == 0 else ("x", repr(x))  # nan, inf, -inf have no literal
    d = depth + 1
    if isinstance(x, int):
        return int.__int__(x)  # an int subclass (IntEnum, ...) crosses as its value
    if isinstance(x, float):
        return encode(float.__float__(x)) if type(x).__module__ != "numpy" else _encode_numpy(x)
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    if isinstance(x, complex):  # numpy's complex128 subclasses complex: it crosses as itself (its arithmetic differs)
        if type(x).__module__ == "numpy":
            return _encode_numpy(x)
        return ("c", encode(complex.__complex__(x).real), encode(complex.__complex__(x).imag))
    if isinstance(x, tuple):
        return ("t", [encode(v, d) for v in tuple.__iter__(x)])
    if isinstance(x, list):
        return ("l", [encode(v, d) for v in list.__iter__(x)])
    if isinstance(x, dict):  # Counter, OrderedDict, defaultdict cross as dicts
        return ("d", [[encode(k, d), encode(v, d)] for k, v in dict.items(x)])
    if isinstance(x, (set, frozenset)):
        return ("s" if isinstance(x, set) else "f", [encode(v, d) for v in frozenset.__iter__(frozenset(x))])
    if type(x).__module__ == "numpy":
        return _encode_numpy(x)
    if type(x) is Ref:
        return ("r", x.name)
    raise NotPlainData(f"a {type(x).__module__}.{type(x).__qualname__} is not plain data")


def _encode_numpy(x):
    import numpy as np

    if isinstance(x, np.ndarray) and type(x) is np.ndarray and x.dtype.kind in _NUMERIC_KINDS:
        return ("a", x.dtype.str, list(x.shape), np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic) and x.dtype.kind in _NUMERIC_KINDS:
        return ("n", x.dtype.str, x.tobytes())
    if isinstance(x, np.str_):
        return str.__str__(x)
    raise NotPlainData(f"a numpy {type(x).__name__} of dtype {getattr(x, 'dtype', '?')} is not plain data")


def decode(t, resolve=None):
    """Rebuild a value from a literal tree; ``resolve(name)`` turns a reference (``("r", name)``) into a value."""
    if t is None or type(t) in (bool, int, float, str, bytes):
        return t
    if type(t) is not tuple or not t or type(t[0]) is not str:
        raise NotPlainData(f"unexpected {type(t).__name__} in a message")
    tag, rest = t[0], t[1:]
    if tag in ("t", "l", "s", "f") and len(rest) == 1 and type(rest[0]) is list:
        items = [decode(v, resolve) for v in rest[0]]
        return {"t": tuple, "l": list, "s": set, "f": frozenset}[tag](items)
    if tag == "d" and len(rest) == 1 and type(rest[0]) is list:
        return {decode(k, resolve): decode(v, resolve) for k, v in rest[0]}
    if tag == "x" and rest in (("nan",), ("inf",), ("-inf",)):
        return float(rest[0])
    if tag == "c" and len(rest) == 2:
        return complex(_number(decode(rest[0])), _number(decode(rest[1])))
    if tag in ("a", "n"):
        return _decode_numpy(tag, rest)
    if tag == "r" and len(rest) == 1 and type(rest[0]) is str and resolve is not None:
        return resolve(rest[0])
    raise NotPlainData(f"unknown tag {tag!r} in a message")


def _number(v):
    if type(v) not in (int, float):
        raise NotPlainData("a complex part is not a number")
    return v


def _decode_numpy(tag, rest):
    import numpy as np

    if tag == "a" and len(rest) == 3 and type(rest[0]) is str and type(rest[1]) is list and type(rest[2]) is bytes:
        dtype = np.dtype(rest[0])
        if dtype.kind in _NUMERIC_KINDS and all(type(n) is int and n >= 0 for n in rest[1]):
            return np.frombuffer(rest[2], dtype=dtype).reshape(rest[1]).copy()
    if tag == "n" and len(rest) == 2 and type(rest[0]) is str and type(rest[1]) is bytes:
        dtype = np.dtype(rest[0])
        if dtype.kind in _NUMERIC_KINDS:
            return np.frombuffer(rest[1], dtype=dtype)[0]
    raise NotPlainData("a malformed numpy value in a message")


def send(fd, tree):
    data = repr(tree).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise NotPlainData(f"a message of {len(data):,} bytes (the limit is {MAX_MESSAGE:,})")
    data = len(data).to_bytes(8, "big") + data
    while data:
        data = data[os.write(fd, data):]


def _read_exactly(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd):
    """The next message's literal tree, or None when the other side closed the pipe."""
    head = _read_exactly(fd, 8)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    if size > MAX_MESSAGE:
        raise NotPlainData(f"a message of {size:,} bytes (the limit is {MAX_MESSAGE:,})")
    body = _read_exactly(fd, size)
    if body is None:
        return None
    return ast.literal_eval(body.decode("utf-8"))


def serve(program, setup, request_fd, reply_fd):
    """The candidate's side: run its program (then the tests' fixtures), then answer calls until the pipe closes."""
    import builtins

    ns = {"__name__": "__main__", "__builtins__": builtins}
    # builtins the program patches (isinstance, repr) are put back before each message: this side's parsing and
    # encoding use them. Nothing here is a guard (the judge trusts no reply); it keeps honest replies readable.
    saved, live = dict(vars(builtins)), vars(builtins)
    exec(compile(program, "<candidate>", "exec"), ns)
    if setup:
        exec(compile(setup, "<test setup>", "exec"), ns)
    while True:
        if live != saved:
            live.clear()
            live.update(saved)
        message = receive(request_fd)
        if message is None:
            return
        try:
            name, args, kwargs = message
            if name not in ns:
                raise NameError(f"name {name!r} is not defined")
            result = ns[name](*decode(args, ns.__getitem__), **decode(kwargs, ns.__getitem__))
            reply = ("ok", encode(result))
        except BaseException as err:  # SystemExit too: the call failed, the server goes on
            reply = ("error", type(err).__name__, str(err)[:500])
        if live != saved:
            live.clear()
            live.update(saved)
        try:
            send(reply_fd, reply)
        except Exception as err:  # too big, or an int too long for repr
            send(reply_fd, ("error", "NotPlainData", str(err)[:500]))


class Ref:
    """A name of the candidate's side, in the tests: calling it calls the candidate; as an argument it is that value."""

    __slots__ = ("name", "_channel")

    def __init__(self, name, channel):
        self.name, self._channel = name, channel

    def __call__(self, *args, **kwargs):
        return self._channel.call(self.name, args, kwargs)

    def __repr__(self):
        return f"<candidate's {self.name}>"


class Channel:
    def __init__(self, request_fd, reply_fd):
        self.request_fd, self.reply_fd, self.calls = request_fd, reply_fd, 0

    def call(self, name, args, kwargs):
        self.calls += 1
        send(self.request_fd, (name, encode(args), encode(kwargs)))
        try:
            reply = receive(self.reply_fd)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
            raise NotPlainData(f"{name}(...) replied with something that is not plain data ({err})") from None
        if reply is None:
            raise RemoteError(f"the candidate's process ended during the call of {name}(...)")
        if type(reply) is tuple and len(reply) == 2 and reply[0] == "ok":
            return decode(reply[1])
        if type(reply) is tuple and len(reply) == 3 and reply[0] == "error" and type(reply[1]) is str:
            raise _exception(reply[1], f"{name}(...) raised {reply[1]}: {reply[2]}")
        raise NotPlainData(f"{name}(...) replied with a malformed message")


def _exception(type_name, message):
    """A builtin exception of that name (tests may expect one), else :class:`RemoteError`."""
    import builtins

    if type_name == "NotPlainData":
        return NotPlainData(message)
    cls = getattr(builtins, type_name, None) if type_name.isidentifier() else None
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, StopIteration):
        return cls(message)
    return RemoteError(message)


def judge(spec, request_fd, reply_fd, verdict_fd):
    """The tests' side: trusted setup, then the tests with the candidate's names as :class:`Ref`; verdict as JSON."""
    import builtins
    import json
    import traceback

    channel = Channel(request_fd, reply_fd)
    ns = {"__name__": "__main__", "__builtins__": builtins}
    verdict = {"passed": False, "error": None, "calls": 0}
    try:
        values_fd = spec.get("values_fd")
        if values_fd is not None:
            size = os.fstat(values_fd).st_size
            ns.update(decode(ast.literal_eval(os.pread(values_fd, size, 0).decode("utf-8"))))
            os.close(values_fd)
        exec(compile(spec["trusted_setup"], "<trusted setup>", "exec"), ns)
        for module in spec["imports"]:
            ns[module] = __import__(module)
        for name in spec["remote"]:
            ns[name] = Ref(name, channel)
        exec(compile(spec["tests"], "<tests>", "exec"), ns)
        verdict["passed"] = True
    except BaseException as err:  # noqa: BLE001  every way the tests can end is a verdict
        lines = traceback.format_exception(type(err), err, err.__traceback__)
        verdict["error"] = "".join(lines)[-1500:]
    verdict["calls"] = channel.calls
    os.close(request_fd)  # the candidate's server sees the end of its requests and returns
    os.write(verdict_fd, json.dumps(verdict).encode("utf-8"))
    sys.stdout.flush()
