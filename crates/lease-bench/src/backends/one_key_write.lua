-- A design the Redis store did not take, kept to measure it (`redis-server-time`): the
-- record and its counters in one hash with no key expiry, the expiry a field judged on
-- the server's `TIME`, so that a write reads one key (`HGETALL`, and its `PTTL`: it
-- must have none) and writes it with one `HSET` (no second hash, no `PEXPIRE`). It
-- checks every field as the store's write script does. Modes `claim` and `release`
-- only. It runs after the store's own
-- helpers (`crates/store-redis/src/prelude.lua`: `is_uint`, `is_count`, `is_token`,
-- `gt`, `inc`), which every store script defines too.
--
-- KEYS = the hash. ARGV = mode, expected version, holder, token, ttl ms, channel.
-- Reply: {'written', token, version}, {'conflict'}, {'conflict_absent'},
-- {'corrupt', why} or {'exhausted'}.
-- Record fields h t ttl x (expiry, server ms); counters e (epoch) f (token) n (version).
local KNOWN = { h = true, t = true, ttl = true, x = true, e = true, f = true, n = true }
local function load(k, now)
  local all = redis.pcall('HGETALL', k)
  if all.err then return 'corrupt', 'the key holds a ' .. redis.call('TYPE', k).ok .. ', not a hash' end
  if #all == 0 then return 'absent', nil end
  -- An expiry the script did not set would end the token sequence: corrupt.
  if redis.call('PTTL', k) ~= -1 then return 'corrupt', 'the hash has an expiry' end
  local r = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if not KNOWN[f] then return 'corrupt', 'unknown field ' .. f end
    r[f] = all[i + 1]
  end
  if type(r.e) ~= 'string' or string.match(r.e, '^%d+$') == nil then return 'corrupt', 'bad counter epoch' end
  if not is_count(r.f) or gt(r.f, TMAX) then return 'corrupt', 'bad token counter' end
  if not is_count(r.n) then return 'corrupt', 'bad version counter' end
  if r.h == nil then
    if r.t or r.ttl or r.x then return 'corrupt', 'record fields without a holder' end
    return 'absent', r
  end
  if r.h ~= '' and (#r.h > 128 or string.match(r.h, '^[%w%-_%.:/@=#]+$') == nil) then
    return 'corrupt', 'bad holder'
  end
  if not is_token(r.t) then return 'corrupt', 'bad token' end
  if not is_uint(r.ttl, 9) then return 'corrupt', 'bad ttl' end
  if not is_uint(r.x, 16) then return 'corrupt', 'bad expiry' end
  local left = tonumber(r.x) - now
  if left <= 0 then return 'absent', r end
  if left > tonumber(r.ttl) then return 'corrupt', 'the expiry lies beyond the ttl' end
  return 'ok', r
end
local k = KEYS[1]
local mode, expect, holder, token, ttl, chan = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local st, cur = load(k, now)
if st == 'corrupt' then return { 'corrupt', cur } end
if mode ~= 'claim' and mode ~= 'release' then return redis.error_reply('unknown write mode') end
-- A claim takes a free name; a release vacates this holder's record at its version.
local applies = st == 'absent' or cur.h == ''
if mode == 'release' then
  applies = st == 'ok' and cur.e .. ':' .. cur.n == expect and holder ~= '' and cur.h == holder and cur.t == token
  holder = ''
end
if not applies then return { st == 'absent' and 'conflict_absent' or 'conflict' } end
local e, f, n = tm[1] .. string.format('%06d', tonumber(tm[2])), '0', '0'
if cur then e, f, n = cur.e, cur.f, cur.n end
if n == I64MAX then return redis.error_reply('the version counter is exhausted') end
n = inc(n)
if mode == 'claim' then
  if cur and cur.t and gt(cur.t, f) then f = cur.t end
  if f == TMAX then return { 'exhausted' } end
  f = inc(f)
  token = f
end
redis.call('HSET', k, 'h', holder, 't', token, 'ttl', ttl, 'x', string.format('%d', now + tonumber(ttl)), 'e', e, 'f', f, 'n', n)
if holder == '' then redis.call('PUBLISH', chan, e .. ':' .. n) end
return { 'written', token, e .. ':' .. n }
