//! The Lua scripts: every store operation is one `EVALSHA` of one of these.
//!
//! Numbers stay decimal strings inside the scripts: Redis hands integers to Lua as
//! doubles, which lose precision above 2^53 and print in exponent form above 10^14, so
//! tokens are compared by length then lexically ([`PRELUDE`]'s `gt`) and a counter is
//! raised by the script itself ([`PRELUDE`]'s `inc`, digit by digit where a double is
//! not exact). Each record and counter hash is read with one `HGETALL` (and its `PTTL`)
//! and written with one `HSET`: a write raises the version counter (and a grant the
//! token counter) in the same `HSET`, and a renewal rewrites only the record fields it
//! changes. Every script validates everything it reads
//! before its first write, so it either applies whole or changes nothing; the `#!lua`
//! shebang makes Redis 7 refuse a writing script up front when it is out of memory
//! rather than fail it half way.

use std::sync::LazyLock;

use redis::Script;

/// Helpers shared by the lease scripts (`prelude.lua`).
const PRELUDE: &str = include_str!("prelude.lua");

/// `read`: KEYS = record. Reply: `{'absent'}`, `{'corrupt', why}` or
/// `{'ok', holder, token, ttl, wall, version, pttl}`.
const READ: &str = r#"
local st, r = load_rec(KEYS[1])
if st == 'ok' then return reply('ok', r) end
if st == 'corrupt' then return { 'corrupt', r } end
return { 'absent' }
"#;

/// `write`, `renew` and `release`: KEYS = record, meta. ARGV = mode (`absent`,
/// `version`, `claim`, `renew`, `release`), expected version, holder (`""` = vacant; for
/// `release`, the holder released), token, ttl ms, wall expiry ms (`""` = none), channel.
/// A `release` applies only while the record shows that holder with that token, and
/// leaves it vacant. A write that leaves the record vacant (a release) publishes the
/// record's new version on the channel.
///
/// Reply: `{'written', token, version}`, `{'conflict', record…}`, `{'conflict_absent'}`,
/// `{'corrupt', why}` or `{'exhausted'}` (the token counter is at `FencingToken::MAX`).
const WRITE: &str = r#"
local mode, expect, holder, token, ttl, wall, chan = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local st, cur = load_rec(KEYS[1])
if st == 'corrupt' then return { 'corrupt', cur } end
local mst, meta = load_meta(KEYS[2])
if mst == 'corrupt' then return { 'corrupt', meta } end
local applies
if mode == 'absent' then
  applies = st == 'absent'
elseif mode == 'version' then
  -- A foreign writer (redis-cli HSET) can raise the token without touching the
  -- version: a token never goes backwards.
  applies = st == 'ok' and cur.v == expect and not gt(cur.t, token)
elseif mode == 'renew' then
  applies = st == 'ok' and cur.v == expect and holder ~= '' and cur.h == holder and cur.t == token
elseif mode == 'release' then
  -- As a renewal: an operator's HSET of the holder or the token (the version untouched)
  -- is never undone by a release.
  applies = st == 'ok' and cur.v == expect and holder ~= '' and cur.h == holder and cur.t == token
  holder = ''
elseif mode == 'claim' then
  applies = st == 'absent' or cur.h == ''
else
  return redis.error_reply('leasehold: unknown write mode')
end
if not applies then
  if st == 'absent' then return { 'conflict_absent' } end
  -- The counter keeps the highest token the record has ever shown, also one a foreign
  -- writer put there: the record may expire before anyone claims the name.
  if mst == 'absent' then meta = init_meta(KEYS[2]) end
  if gt(cur.t, meta.f) then redis.call('HSET', KEYS[2], 'f', cur.t) end
  return reply('conflict', cur)
end
if mode == 'claim' then
  local high = '0'
  if mst == 'ok' then high = meta.f end
  if st == 'ok' and gt(cur.t, high) then high = cur.t end
  if high == TMAX then return { 'exhausted' } end
end
-- Both counters are raised in the script and written back with one `HSET`: a new
-- counter hash (a new epoch) is written whole.
local fresh = mst == 'absent'
if fresh then meta = new_meta() end
-- A write under a name given an expiry (`expire`) takes the counter off it again.
if meta.x then redis.call('PERSIST', KEYS[2]) redis.call('HDEL', KEYS[2], 'x') end
if meta.n == I64MAX then return redis.error_reply('leasehold: the version counter is exhausted') end
local n = inc(meta.n)
local v = meta.e .. ':' .. n
local f = meta.f
if mode == 'renew' then
  -- A renewal changes the version, the expiry and what the renewal itself sets (TTL,
  -- wall-clock expiry); never the holder or the token.
  if wall == '' then
    redis.call('HSET', KEYS[1], 'v', v, 'ttl', ttl)
    if cur.w ~= nil then redis.call('HDEL', KEYS[1], 'w') end
  else
    redis.call('HSET', KEYS[1], 'v', v, 'ttl', ttl, 'w', wall)
  end
else
  if mode == 'claim' then
    if st == 'ok' and gt(cur.t, f) then f = cur.t end
    f = inc(f)
    token = f
  elseif gt(token, f) then
    f = token
  end
  -- The record has no fields but these (`load_rec`): rewriting them all, and removing
  -- a wall-clock expiry the write does not set, leaves nothing of the old record.
  if wall == '' then
    redis.call('HSET', KEYS[1], 'h', holder, 't', token, 'ttl', ttl, 'v', v)
    if st == 'ok' and cur.w ~= nil then redis.call('HDEL', KEYS[1], 'w') end
  else
    redis.call('HSET', KEYS[1], 'h', holder, 't', token, 'ttl', ttl, 'v', v, 'w', wall)
  end
end
if fresh then
  redis.call('HSET', KEYS[2], 'e', meta.e, 'f', f, 'n', n)
elseif f ~= meta.f then
  redis.call('HSET', KEYS[2], 'n', n, 'f', f)
else
  redis.call('HSET', KEYS[2], 'n', n)
end
redis.call('PEXPIRE', KEYS[1], ttl)
if holder == '' then redis.call('PUBLISH', chan, v) end
-- The caller knows the rest of what it wrote; the time left is the TTL just set (a
-- script runs on one frozen clock).
return { 'written', token, v }
"#;

/// `delete`: KEYS = record, meta. ARGV = version, channel. Raises the write counter, so
/// the delete has a version of its own (`epoch:n`, above the deleted record's), and
/// publishes it. Reply: `{'deleted'}`, `{'conflict', record…}`, `{'conflict_absent'}` or
/// `{'corrupt', why}`.
const DELETE: &str = r#"
local st, cur = load_rec(KEYS[1])
if st == 'corrupt' then return { 'corrupt', cur } end
if st == 'absent' then return { 'conflict_absent' } end
if cur.v ~= ARGV[1] then return reply('conflict', cur) end
local mst, meta = load_meta(KEYS[2])
if mst == 'corrupt' then return { 'corrupt', meta } end
if mst == 'absent' then meta = init_meta(KEYS[2]) end
if meta.n == I64MAX then return redis.error_reply('leasehold: the version counter is exhausted') end
local n = inc(meta.n)
redis.call('HSET', KEYS[2], 'n', n)
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], meta.e .. ':' .. n)
return { 'deleted' }
"#;

/// `purge`: KEYS = record, meta. ARGV = version. Deletes the record and its counter
/// hash if the record has the version, or, the record being gone (its `PX` ran out),
/// if the counter hash shows no write since that version. Reply: `{'deleted'}`,
/// `{'conflict', record…}`, `{'conflict_absent'}` or `{'corrupt', why}`.
const PURGE: &str = r#"
local st, cur = load_rec(KEYS[1])
if st == 'corrupt' then return { 'corrupt', cur } end
if st == 'ok' then
  if cur.v ~= ARGV[1] then return reply('conflict', cur) end
else
  local mst, meta = load_meta(KEYS[2])
  if mst == 'corrupt' then return { 'corrupt', meta } end
  if mst == 'absent' or meta.e .. ':' .. meta.n ~= ARGV[1] then return { 'conflict_absent' } end
end
redis.call('DEL', KEYS[1], KEYS[2])
return { 'deleted' }
"#;

/// `expire`: KEYS = record, meta. ARGV = version, milliseconds. If the record has the
/// version, or, the record being gone, the counter hash shows no write since that
/// version, the counter hash is given a `PEXPIRE` of the milliseconds (or of the
/// record's own `PTTL`, if longer: the counter outlives the record) and the field `x`
/// that says the expiry is the scripts' own (any other expiry on a counter hash is
/// corrupt; a later write removes both). The record keeps its own `PX`. Reply: `{'scheduled'}`, `{'conflict', record…}`, `{'conflict_absent'}` or
/// `{'corrupt', why}`.
const EXPIRE: &str = r#"
local st, cur = load_rec(KEYS[1])
if st == 'corrupt' then return { 'corrupt', cur } end
local mst, meta = load_meta(KEYS[2])
if mst == 'corrupt' then return { 'corrupt', meta } end
if st == 'ok' then
  if cur.v ~= ARGV[1] then return reply('conflict', cur) end
elseif mst == 'absent' or meta.e .. ':' .. meta.n ~= ARGV[1] then
  return { 'conflict_absent' }
end
local after = tonumber(ARGV[2])
if st == 'ok' and cur.pttl > after then after = cur.pttl end
if mst == 'ok' then
  redis.call('HSET', KEYS[2], 'x', '1')
  redis.call('PEXPIRE', KEYS[2], after)
end
return { 'scheduled' }
"#;

/// `seed_fence_counter`: KEYS = record, meta. ARGV = the minimum. Raises the token
/// counter to at least the minimum and the current record's token. Reply:
/// `{'seeded', counter}` or `{'corrupt', why}`.
const SEED: &str = r#"
local st, cur = load_rec(KEYS[1])
if st == 'corrupt' then return { 'corrupt', cur } end
local mst, meta = load_meta(KEYS[2])
if mst == 'corrupt' then return { 'corrupt', meta } end
if mst == 'absent' then meta = init_meta(KEYS[2]) end
local high = meta.f
if gt(ARGV[1], high) then high = ARGV[1] end
if st == 'ok' and gt(cur.t, high) then high = cur.t end
if high ~= meta.f then redis.call('HSET', KEYS[2], 'f', high) end
return { 'seeded', high }
"#;

/// Fenced write on a user's hash: KEYS = resource. ARGV = token, mode (`le` or `lt`),
/// mark field, then (op, field, value) triples with op `set`, `incr` or `del`.
///
/// Reply: `{'ok', previous mark, new value of each incr field…}`,
/// `{'rejected', mark}`, `{'bad_mark', why}` (the key is not a hash, or its mark is not a
/// token) or `{'corrupt', why}` (an `incr` field is not an integer).
const FENCE: &str = r#"#!lua
local k, token, mode, mark_field = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local function is_mark(s)
  return s == '0' or (#s <= 19 and string.match(s, '^[1-9]%d*$') ~= nil and (#s < 19 or s <= '9223372036854775807'))
end
local function gt(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local ty = redis.call('TYPE', k).ok
if ty ~= 'none' and ty ~= 'hash' then return { 'bad_mark', 'the key holds a ' .. ty .. ', not a hash' } end
local mark = redis.call('HGET', k, mark_field)
if mark then
  if not is_mark(mark) then return { 'bad_mark', 'the high-water mark ' .. mark .. ' is not a token' } end
  local refused
  if mode == 'lt' then refused = not gt(token, mark) else refused = gt(mark, token) end
  if refused then return { 'rejected', mark } end
else
  mark = '0'
end
for i = 4, #ARGV, 3 do
  if ARGV[i] == 'incr' then
    local v = redis.call('HGET', k, ARGV[i + 1])
    local digits = v and string.match(v, '^%-?([1-9]%d*)$')
    if v and v ~= '0' and not (digits and #digits <= 18) then
      return { 'corrupt', 'field ' .. ARGV[i + 1] .. ' is not an integer of at most 18 digits' }
    end
  end
end
local out = { 'ok', mark }
for i = 4, #ARGV, 3 do
  local op, f, v = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if op == 'set' then
    redis.call('HSET', k, f, v)
  elseif op == 'incr' then
    redis.call('HINCRBY', k, f, v)
    out[#out + 1] = redis.call('HGET', k, f)
  else
    redis.call('HDEL', k, f)
  end
end
redis.call('HSET', k, mark_field, token)
return out
"#;

/// Reads a resource's high-water mark: KEYS = resource, ARGV = mark field.
/// Reply: `{'mark', mark}` (`'0'` if none) or `{'bad_mark', why}`.
const MARK: &str = r#"#!lua flags=no-writes
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'hash' then return { 'bad_mark', 'the key holds a ' .. ty .. ', not a hash' } end
local mark = redis.call('HGET', KEYS[1], ARGV[1])
if not mark then return { 'mark', '0' } end
if mark ~= '0' and (string.match(mark, '^[1-9]%d*$') == nil or #mark > 19 or (#mark == 19 and mark > '9223372036854775807')) then
  return { 'bad_mark', 'the high-water mark is not a token' }
end
return { 'mark', mark }
"#;

fn lease_script(shebang: &str, body: &str) -> Script {
    Script::new(&format!("{shebang}\n{PRELUDE}{body}"))
}

/// The `read` script (declared read-only: it runs on replicas and when out of memory).
pub(crate) static READ_SCRIPT: LazyLock<Script> = LazyLock::new(|| lease_script("#!lua flags=no-writes", READ));
/// The `write` / `renew` script.
pub(crate) static WRITE_SCRIPT: LazyLock<Script> = LazyLock::new(|| lease_script("#!lua", WRITE));
/// The `delete` script.
pub(crate) static DELETE_SCRIPT: LazyLock<Script> = LazyLock::new(|| lease_script("#!lua", DELETE));
/// The `purge` script.
pub(crate) static PURGE_SCRIPT: LazyLock<Script> = LazyLock::new(|| lease_script("#!lua", PURGE));
/// The `expire` script.
pub(crate) static EXPIRE_SCRIPT: LazyLock<Script> = LazyLock::new(|| lease_script("#!lua", EXPIRE));
/// The `seed_fence_counter` script.
pub(crate) static SEED_SCRIPT: LazyLock<Script> = LazyLock::new(|| lease_script("#!lua", SEED));
/// The fenced-write script.
pub(crate) static FENCE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(FENCE));
/// The high-water-mark read script.
pub(crate) static MARK_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(MARK));

/// Every script, for preloading with `SCRIPT LOAD`.
pub(crate) fn all() -> [&'static Script; 8] {
    [
        &READ_SCRIPT,
        &WRITE_SCRIPT,
        &DELETE_SCRIPT,
        &PURGE_SCRIPT,
        &EXPIRE_SCRIPT,
        &SEED_SCRIPT,
        &FENCE_SCRIPT,
        &MARK_SCRIPT,
    ]
}
