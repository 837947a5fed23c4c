package costs

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLimiter shares the windows of Limiter between gateway processes. A
// window is three keys with one hash tag (so they live on one cluster
// slot): a sorted set member -> time (ms), a hash member -> amount, and the
// running total. Every operation is one Lua script, so it is atomic on the
// server; times are the calling gateway's clock (keep clocks in sync, as
// for any distributed rate limit).
type redisLimiter struct {
	rdb    *redis.Client
	prefix string
	now    func() time.Time
}

// NewRedisLimiter connects to the Redis at url (redis://[user:pass@]host:port/db).
// Keys are created under prefix (default "agentry:rl:"); now is the clock
// (nil: time.Now).
func NewRedisLimiter(url, prefix string, now func() time.Time) (Limiter, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		// go-redis errors do not echo the URL (which may hold a password).
		return nil, fmt.Errorf("rate_limit.redis_url: %w", err)
	}
	if prefix == "" {
		prefix = "agentry:rl:"
	}
	if now == nil {
		now = time.Now
	}
	return &redisLimiter{rdb: redis.NewClient(opts), prefix: prefix, now: now}, nil
}

// Ping checks the connection (start-up and status).
func (r *redisLimiter) Ping(ctx context.Context) error {
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("rate limit redis: %w", err)
	}
	return nil
}

func (r *redisLimiter) keys(key string) []string {
	base := r.prefix + "{" + key + "}"
	return []string{base + ":z", base + ":h", base + ":t"}
}

// expireLua drops entries at or before now - span, in batches.
const expireLua = `
local z, h, t = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
while true do
  local old = redis.call('ZRANGEBYSCORE', z, '-inf', now - span, 'LIMIT', 0, 500)
  if #old == 0 then break end
  local amounts = redis.call('HMGET', h, unpack(old))
  local freed = 0
  for i = 1, #amounts do
    if amounts[i] then freed = freed + tonumber(amounts[i]) end
  end
  redis.call('HDEL', h, unpack(old))
  redis.call('ZREM', z, unpack(old))
  if freed ~= 0 then redis.call('DECRBY', t, freed) end
  if #old < 500 then break end
end
`

var takeScript = redis.NewScript(expireLua + `
local limit = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local minimum = tonumber(ARGV[5])
local member = ARGV[6]
local have = redis.call('HGET', h, member)
if have then return {tonumber(have), 0} end
local total = tonumber(redis.call('GET', t) or '0')
local free = limit - total
local grant = want
if free < grant then grant = free end
if grant < minimum or grant <= 0 then
  local need = minimum - free
  if minimum < 1 then need = 1 - free end
  local entries = redis.call('ZRANGE', z, 0, 999, 'WITHSCORES')
  local freed = 0
  for i = 1, #entries, 2 do
    freed = freed + tonumber(redis.call('HGET', h, entries[i]) or '0')
    if freed >= need then return {0, tonumber(entries[i + 1]) + span - now} end
  end
  return {0, span}
end
redis.call('ZADD', z, now, member)
redis.call('HSET', h, member, grant)
redis.call('INCRBY', t, grant)
redis.call('PEXPIRE', z, span)
redis.call('PEXPIRE', h, span)
redis.call('PEXPIRE', t, span)
return {grant, 0}
`)

var setScript = redis.NewScript(expireLua + `
local member = ARGV[3]
local amount = tonumber(ARGV[4])
local have = redis.call('HGET', h, member)
if not have then return 0 end
if amount <= 0 then
  redis.call('HDEL', h, member)
  redis.call('ZREM', z, member)
else
  redis.call('HSET', h, member, amount)
end
local delta = amount - tonumber(have)
if amount <= 0 then delta = -tonumber(have) end
redis.call('INCRBY', t, delta)
return 1
`)

var usedScript = redis.NewScript(expireLua + `
return tonumber(redis.call('GET', t) or '0')
`)

func (r *redisLimiter) Take(ctx context.Context, key, member string, span time.Duration, limit, want, min int64) (int64, time.Duration, error) {
	res, err := takeScript.Run(ctx, r.rdb, r.keys(key), r.now().UnixMilli(), span.Milliseconds(), limit, want, min, member).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("rate limit %s: %w", key, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("rate limit %s: unexpected reply %v", key, res)
	}
	return res[0], time.Duration(res[1]) * time.Millisecond, nil
}

func (r *redisLimiter) Set(ctx context.Context, key, member string, span time.Duration, amount int64) error {
	if err := setScript.Run(ctx, r.rdb, r.keys(key), r.now().UnixMilli(), span.Milliseconds(), member, amount).Err(); err != nil {
		return fmt.Errorf("rate limit %s: %w", key, err)
	}
	return nil
}

func (r *redisLimiter) Used(ctx context.Context, key string, span time.Duration) (int64, error) {
	n, err := usedScript.Run(ctx, r.rdb, r.keys(key), r.now().UnixMilli(), span.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("rate limit %s: %w", key, err)
	}
	return n, nil
}

func (r *redisLimiter) Close() error { return r.rdb.Close() }
