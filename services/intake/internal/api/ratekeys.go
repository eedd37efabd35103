package api

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// rateLibPrefix is what go-redis/redis_rate puts before every key it is given.
const rateLibPrefix = "rate:"

// rateRedis is the Redis client redis_rate runs on, with the library's fixed "rate:" taken off
// every key again, so the limiter's keys start with TURNSTILE_KEY_PREFIX like every other key
// turnstile writes (deployments sharing a Redis, and tests, tell their keys apart by it).
type rateRedis struct {
	redis.UniversalClient
}

func unprefixRate(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.TrimPrefix(k, rateLibPrefix)
	}
	return out
}

func (r rateRedis) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.Eval(ctx, script, unprefixRate(keys), args...)
}

func (r rateRedis) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.EvalSha(ctx, sha1, unprefixRate(keys), args...)
}

func (r rateRedis) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.EvalRO(ctx, script, unprefixRate(keys), args...)
}

func (r rateRedis) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.UniversalClient.EvalShaRO(ctx, sha1, unprefixRate(keys), args...)
}

func (r rateRedis) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return r.UniversalClient.Del(ctx, unprefixRate(keys)...)
}
