-- Helpers shared by the lease scripts (`scripts.rs` puts this before each script's body).
local I64MAX = '9223372036854775807'
-- The last token (`FencingToken::MAX`, i64::MAX - 1): a token or counter above it is corrupt.
local TMAX = '9223372036854775806'
local function is_uint(s, maxlen)
  return type(s) == 'string' and #s <= maxlen and string.match(s, '^[1-9]%d*$') ~= nil
end
local function is_count(s)
  return type(s) == 'string' and (s == '0' or (is_uint(s, 19) and (#s < 19 or s <= I64MAX)))
end
local function is_token(s)
  return is_uint(s, 19) and (#s < 19 or s <= TMAX)
end
local function gt(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
-- A hash's fields and values, or nil and why not (a key of another type). `HGETALL`
-- of a missing key is empty: Redis never keeps an empty hash.
local function hash_fields(k, what)
  local all = redis.pcall('HGETALL', k)
  if all.err then return nil, 'the key holds a ' .. redis.call('TYPE', k).ok .. ', not ' .. what end
  return all
end
-- The successor of a count (validated decimal digits), as decimal digits: Lua numbers
-- are doubles, exact below 2^53, so longer counts are raised digit by digit.
local function inc(s)
  if #s < 15 then return string.format('%d', tonumber(s) + 1) end
  local i = #s
  while i > 0 and string.byte(s, i) == 57 do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end
local function load_rec(k)
  local all, why = hash_fields(k, 'a lease record hash')
  if not all then return 'corrupt', why end
  if #all == 0 then return 'absent' end
  local r = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if f ~= 'h' and f ~= 't' and f ~= 'ttl' and f ~= 'w' and f ~= 'v' then
      return 'corrupt', 'unknown field ' .. f
    end
    r[f] = all[i + 1]
  end
  if r.h == nil or (r.h ~= '' and (#r.h > 128 or string.match(r.h, '^[%w%-_%.:/@=#]+$') == nil)) then
    return 'corrupt', 'bad holder'
  end
  if not is_token(r.t) then return 'corrupt', 'bad token' end
  if not is_uint(r.ttl, 9) then return 'corrupt', 'bad ttl' end
  if r.w ~= nil and not is_count(r.w) then return 'corrupt', 'bad wall-clock expiry' end
  if r.v == nil or string.match(r.v, '^%d+:[1-9]%d*$') == nil then return 'corrupt', 'bad version' end
  local pttl = redis.call('PTTL', k)
  if pttl < 0 then return 'corrupt', 'the record has no expiry' end
  r.pttl = pttl
  return 'ok', r
end
local function load_meta(k)
  local all, why = hash_fields(k, 'a hash')
  if not all then return 'corrupt', 'the counter ' .. why end
  if #all == 0 then return 'absent' end
  -- Three fields, and a fourth, `x`, while `expire` has the hash expiring.
  if #all ~= 6 and #all ~= 8 then return 'corrupt', 'the counter hash has unknown fields' end
  local m = {}
  for i = 1, #all, 2 do m[all[i]] = all[i + 1] end
  if #all == 8 and m.x ~= '1' then return 'corrupt', 'the counter hash has unknown fields' end
  if type(m.e) ~= 'string' or string.match(m.e, '^%d+$') == nil then return 'corrupt', 'bad counter epoch' end
  if not is_count(m.f) or gt(m.f, TMAX) then return 'corrupt', 'bad token counter' end
  if not is_count(m.n) then return 'corrupt', 'bad version counter' end
  -- An expiry the scripts did not set would end the token sequence: corrupt.
  if m.x == nil and redis.call('PTTL', k) ~= -1 then return 'corrupt', 'the counter hash has an expiry' end
  return 'ok', m
end
-- The counters of a new epoch (named for the server's time in µs), not yet written.
local function new_meta()
  local t = redis.call('TIME')
  return { e = t[1] .. string.format('%06d', tonumber(t[2])), f = '0', n = '0' }
end
local function init_meta(k)
  local m = new_meta()
  redis.call('HSET', k, 'e', m.e, 'f', m.f, 'n', m.n)
  return m
end
local function reply(status, r)
  return { status, r.h, r.t, r.ttl, r.w or '', r.v, r.pttl }
end
