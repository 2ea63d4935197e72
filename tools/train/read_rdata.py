"""Minimal reader for R lazy-load databases (.rdx/.rdb) such as an installed R package's data/Rdata.*.

Reads R's XDR serialization format (versions 2 and 3) for the object types plain data sets use:
character, integer, logical, double vectors, lists, pairlists and attributes. No R needed.
"""
import bz2
import gzip
import lzma
import struct
import zlib


def _decompress(blob):
    if blob[:2] == b"\x1f\x8b":
        return gzip.decompress(blob)
    size = struct.unpack(">I", blob[:4])[0]
    kind = blob[4:5]
    if kind == b"Z":
        out = lzma.decompress(blob[5:])
    elif kind == b"2":
        out = bz2.decompress(blob[5:])
    elif kind == b"0":
        out = blob[5:]
    else:
        out = zlib.decompress(blob[4:])
    assert len(out) == size, (len(out), size)
    return out


class RObject:
    def __init__(self, kind, value, attributes=None):
        self.kind = kind
        self.value = value
        self.attributes = attributes or {}

    def __repr__(self):
        return f"RObject({self.kind}, {str(self.value)[:60]}, attrs={list(self.attributes)})"


class _Unserializer:
    def __init__(self, data):
        self.data = data
        self.pos = 0
        self.refs = []

    def int(self):
        v = struct.unpack(">i", self.data[self.pos:self.pos + 4])[0]
        self.pos += 4
        return v

    def length(self):
        n = self.int()
        if n == -1:
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        return n

    def run(self):
        fmt = self.data[:2]
        assert fmt == b"X\n", fmt
        self.pos = 2
        version = self.int()
        self.int()
        self.int()
        if version == 3:
            n = self.int()
            self.pos += n
        return self.item()

    def attributes(self, pairlist):
        out = {}
        node = pairlist
        while isinstance(node, RObject) and node.kind == "pairlist":
            for tag, value in node.value:
                out[tag] = value
            break
        return out

    def item(self):
        flags = self.int()
        kind = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if kind == 254:  # NILVALUE
            return None
        if kind in (253, 252, 251, 250, 242, 241):  # global/unbound/missing/base ns/empty/base env
            return RObject("special", kind)
        if kind == 255:  # REFSXP
            index = flags >> 8
            if index == 0:
                index = self.int()
            return self.refs[index - 1]
        if kind in (249, 248):  # NAMESPACESXP, PACKAGESXP
            self.int()
            n = self.int()
            info = [self.item() for _ in range(n)]
            obj = RObject("namespace", info)
            self.refs.append(obj)
            return obj
        if kind == 238:  # ALTREP
            info = self.item()
            state = self.item()
            attr = self.item()
            return self.altrep(info, state, attr)
        if kind == 1:  # SYMSXP
            name = self.item()
            obj = RObject("symbol", name)
            self.refs.append(obj)
            return obj
        if kind == 4:  # ENVSXP
            obj = RObject("environment", None)
            self.refs.append(obj)
            self.int()
            enclos, frame, hashtab, attrib = self.item(), self.item(), self.item(), self.item()
            obj.value = {"frame": frame, "hashtab": hashtab}
            return obj
        if kind in (2, 3, 5, 6, 17, 239, 240):  # pairlist-like
            attr = self.item() if has_attr else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            tag_name = tag.value if isinstance(tag, RObject) and tag.kind == "symbol" else None
            items = [(tag_name, car)]
            if isinstance(cdr, RObject) and cdr.kind == "pairlist":
                items.extend(cdr.value)
            return RObject("pairlist", items, self.attributes(attr))
        if kind == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            s = self.data[self.pos:self.pos + n]
            self.pos += n
            return s.decode("utf-8", errors="replace")
        if kind in (10, 13):  # LGLSXP, INTSXP
            n = self.length()
            values = list(struct.unpack(f">{n}i", self.data[self.pos:self.pos + 4 * n]))
            self.pos += 4 * n
            obj = RObject("integer" if kind == 13 else "logical", values)
        elif kind == 14:  # REALSXP
            n = self.length()
            values = list(struct.unpack(f">{n}d", self.data[self.pos:self.pos + 8 * n]))
            self.pos += 8 * n
            obj = RObject("double", values)
        elif kind == 16:  # STRSXP
            n = self.length()
            obj = RObject("character", [self.item() for _ in range(n)])
        elif kind in (19, 20):  # VECSXP, EXPRSXP
            n = self.length()
            obj = RObject("list", [self.item() for _ in range(n)])
        elif kind == 24:  # RAWSXP
            n = self.length()
            obj = RObject("raw", self.data[self.pos:self.pos + n])
            self.pos += n
        else:
            raise ValueError(f"unsupported R type {kind} at {self.pos}")
        if has_attr:
            obj.attributes = self.attributes(self.item())
        return obj

    def altrep(self, info, state, attr):
        cls = info.value[0][1].value if isinstance(info, RObject) else None
        if cls == "compact_intseq":
            n, start, step = state.value
            obj = RObject("integer", [int(start + i * step) for i in range(int(n))])
        elif cls and cls.startswith("wrap_"):
            obj = state.value[0]
        elif cls == "deferred_string":
            arg = state.value[0][1]
            obj = RObject("character", [str(v) for v in arg.value])
        else:
            raise ValueError(f"unsupported ALTREP class {cls}")
        if isinstance(attr, RObject):
            obj.attributes = self.attributes(attr)
        return obj


def unserialize(data):
    return _Unserializer(data).run()


def read_lazy_load_db(prefix):
    """Returns {name: RObject} for every variable in prefix.rdx/prefix.rdb."""
    with open(prefix + ".rdx", "rb") as f:
        index = unserialize(_decompress(f.read()))
    with open(prefix + ".rdb", "rb") as f:
        rdb = f.read()
    names = index.attributes["names"].value
    variables = dict(zip(names, index.value))["variables"]
    out = {}
    for name, loc in zip(variables.attributes["names"].value, variables.value):
        offset, length = loc.value
        out[name] = unserialize(_decompress(rdb[offset:offset + length]))
    return out


if __name__ == "__main__":
    import sys
    for name, obj in read_lazy_load_db(sys.argv[1]).items():
        print(name, obj.kind, len(obj.value) if obj.value is not None else None)
