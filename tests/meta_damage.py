"""Damaging TierFS metadata records behind its back, with each engine's own client, as a bad
disk, an eviction or a careless hand edit would: sqlite3 on the SQLite file, redis-cli
(EVAL: keys are binary) on a Redis database, psql on a PostgreSQL table. Keys are those of
docs/key-schema.md; the Redis layout (value under "k" + KEY, index zset "i" + GROUP) is the
one src/meta/redis_engine.h describes.
"""

import urllib.parse

from harness import msg, run


def u64(n):
    return n.to_bytes(8, "big")


def attr_key(ino):
    return b"A" + u64(ino) + b"I"


def entry_key(parent, name):
    return b"A" + u64(parent) + b"D" + (name.encode() if isinstance(name, str) else name)


def chunks_prefix(ino):
    return b"A" + u64(ino) + b"C"


def group_of(key):
    """keys::ScanGroup: 10 bytes for "A" keys (and "SO"/"SL"), 2 for other "S" keys, else 1."""
    if key[:1] == b"A" or key[:2] in (b"SO", b"SL"):
        return key[:10]
    if key[:1] == b"S":
        return key[:2]
    return key[:1]


def _check(res, what):
    rc, out, err = res
    if rc != 0:
        raise AssertionError("%s failed\n%s" % (what, msg(rc, out, err)))
    return out


class Sqlite:
    def __init__(self, meta_url):
        self.path = meta_url[len("sqlite3://"):]

    def sql(self, statement):
        # The mount may be writing: wait for its locks rather than fail.
        return _check(run("sqlite3", "-cmd", ".timeout 10000", self.path, statement), "sqlite3 " + statement)

    def set(self, key, value):
        """Overwrites an existing record's value, or adds a record."""
        self.sql("INSERT OR REPLACE INTO kv(k, v) VALUES (x'%s', x'%s')" % (key.hex(), value.hex()))

    def set_prefix(self, prefix, value):
        self.sql("UPDATE kv SET v = x'%s' WHERE substr(k, 1, %d) = x'%s'" % (value.hex(), len(prefix), prefix.hex()))


_UNHEX = "local function unhex(h) return (h:gsub('..', function(c) return string.char(tonumber(c, 16)) end)) end\n"


class Redis:
    def __init__(self, meta_url):
        u = urllib.parse.urlparse(meta_url)
        self.args = ["redis-cli", "-h", u.hostname, "-p", str(u.port), "-n", (u.path.strip("/") or "0")]

    def eval(self, script, *hex_args):
        return _check(run(*(self.args + ["EVAL", _UNHEX + script, "0"] + list(hex_args))), "redis-cli EVAL")

    def set(self, key, value):
        """Sets the value (and indexes the key, should it be new), as the engine's commit does."""
        self.eval("local k, g = unhex(ARGV[1]), unhex(ARGV[2])\n"
                  "redis.call('SET', 'k' .. k, unhex(ARGV[3]))\n"
                  "if redis.call('ZADD', 'i' .. g, 0, k) == 1 then redis.call('ZADD', 'G', 0, g) end\n"
                  "redis.call('INCR', 'v' .. g)\n", key.hex(), group_of(key).hex(), value.hex())

    def set_prefix(self, prefix, value):
        self.eval("local p, g = unhex(ARGV[1]), unhex(ARGV[2])\n"
                  "for _, k in ipairs(redis.call('ZRANGEBYLEX', 'i' .. g, '[' .. p, '+')) do\n"
                  "  if string.sub(k, 1, #p) == p then redis.call('SET', 'k' .. k, unhex(ARGV[3])) end\n"
                  "end\n", prefix.hex(), group_of(prefix).hex(), value.hex())

    def wrong_type(self, key):
        """The value replaced by a hash: a GET of it fails (WRONGTYPE)."""
        self.eval("local k = 'k' .. unhex(ARGV[1]); redis.call('DEL', k); redis.call('HSET', k, 'f', 'v')", key.hex())

    def drop_value(self, key):
        """The value gone (evicted, deleted by hand), its index entry left."""
        self.eval("redis.call('DEL', 'k' .. unhex(ARGV[1]))", key.hex())


class Postgres:
    def __init__(self, meta_url):
        self.url = meta_url

    def sql(self, statement):
        return _check(run("psql", self.url, "-q", "-v", "ON_ERROR_STOP=1", "-c", statement), "psql " + statement)

    def set(self, key, value):
        self.sql("INSERT INTO tierfs_kv(k, v) VALUES ('\\x%s'::bytea, '\\x%s'::bytea) "
                 "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v" % (key.hex(), value.hex()))

    def set_prefix(self, prefix, value):
        self.sql("UPDATE tierfs_kv SET v = '\\x%s'::bytea WHERE substring(k from 1 for %d) = '\\x%s'::bytea"
                 % (value.hex(), len(prefix), prefix.hex()))


def for_url(meta_url):
    if meta_url.startswith("sqlite3://"):
        return Sqlite(meta_url)
    if meta_url.startswith("redis://"):
        return Redis(meta_url)
    return Postgres(meta_url)
