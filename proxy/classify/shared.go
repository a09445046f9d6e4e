package classify

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxSharedKeys bounds the keys one classification reads and writes in
// Redis. A prompt of more chunks is looked up at every 2nd, 4th, ... chunk
// boundary (the fewest powers of two that fit), so its reuse is measured to
// within 1/512 of its length.
const MaxSharedKeys = 1024

// RedisOptions configures the connection to a shared prefix index.
type RedisOptions struct {
	// URL is redis://[user:password@]host:port[/db] or rediss://... for TLS.
	URL string
	// Timeout bounds one classification's round trip, connecting included;
	// past it the local index answers.
	Timeout time.Duration
	// RetryAfter is how long a replica answers from its local index after
	// Redis failed, before it tries Redis again with one request.
	RetryAfter time.Duration
	// PoolSize bounds the connections to Redis.
	PoolSize int
	// Log receives one line when Redis fails and one when it is back.
	Log *slog.Logger
	// OnFallback is called for every classification the local index
	// answered because Redis failed or is being waited out.
	OnFallback func()
}

// Redis is a prefix index every tandem replica shares through one Redis
// server (not Cluster: one classification's keys are read and written by one
// script). What Redis holds is, per remembered prefix, a key made of the
// index's name and the first 8 bytes of the SHA-256 of the prefix, with the
// index's TTL; never prompt text. Redis bounds the number of keys with its
// maxmemory and an eviction policy (allkeys-lru forgets the least recently
// seen prefixes first, as the local index does).
//
// While Redis fails, each classification is answered by the local index
// (counted by OnFallback), and only one classification every RetryAfter
// tries Redis again, so an absent Redis costs no timeout per request.
type Redis struct {
	client     *redis.Client
	timeout    time.Duration
	retryAfter time.Duration
	log        *slog.Logger
	onFallback func()
	now        func() time.Time

	mu      sync.Mutex
	down    bool
	retryAt time.Time
	probing bool
}

var quietRedis sync.Once

// NewRedis returns the connection to the shared index at o.URL. It does not
// connect: the first classification does. Errors never quote the URL, which
// may carry a password.
func NewRedis(o RedisOptions) (*Redis, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, errors.New("classify: the Redis URL must be redis://host:port or rediss://host:port")
	}
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, errors.New("classify: the Redis URL does not parse")
	}
	ro.DialTimeout = o.Timeout
	ro.ReadTimeout = o.Timeout
	ro.WriteTimeout = o.Timeout
	ro.ContextTimeoutEnabled = true
	ro.PoolSize = o.PoolSize
	ro.MaxActiveConns = o.PoolSize
	ro.PoolTimeout = o.Timeout
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	ro.DisableIdentity = true
	// go-redis logs every failed dial; the breaker logs an outage once.
	quietRedis.Do(func() { redis.SetLogger(discardLogger{}) })
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	onFallback := o.OnFallback
	if onFallback == nil {
		onFallback = func() {}
	}
	return &Redis{client: redis.NewClient(ro), timeout: o.Timeout, retryAfter: o.RetryAfter,
		log: log, onFallback: onFallback, now: time.Now}, nil
}

// Close closes the connections to Redis.
func (r *Redis) Close() error { return r.client.Close() }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// allow reports whether a classification may ask Redis: always while it
// answers, and once every retryAfter while it does not.
func (r *Redis) allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down {
		return true
	}
	if r.probing || r.now().Before(r.retryAt) {
		return false
	}
	r.probing = true
	return true
}

// report records the outcome of a call that allow let through.
func (r *Redis) report(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probing = false
	if err == nil {
		if r.down {
			r.down = false
			r.log.Info("classifier Redis is back; classifying against the shared index")
		}
		return
	}
	r.retryAt = r.now().Add(r.retryAfter)
	if !r.down {
		r.down = true
		r.log.Warn("classifier Redis failed; classifying against this replica's index until it answers",
			"err", err, "retry_every", r.retryAfter)
	}
}

// lookup finds, among keys (the prefixes of one prompt, shortest first), the
// position of the longest one present, counting from 1 (0 when none is), and
// then remembers them all for ARGV[1] milliseconds. A present key stands for
// its whole prefix, so the scan need not stop at the first missing one.
var lookup = redis.NewScript(`
local found = 0
for i = #KEYS, 1, -1 do
	if redis.call('EXISTS', KEYS[i]) == 1 then
		found = i
		break
	end
end
for i = 1, #KEYS do
	redis.call('SET', KEYS[i], '1', 'PX', ARGV[1])
end
return found
`)

// SharedIndex classifies against the prefix index in Redis, under its own
// name, and keeps its local Index up to date to answer when Redis cannot.
type SharedIndex struct {
	redis  *Redis
	local  *Index
	prefix string
}

// Index returns the shared index called name (e.g. production, mirror),
// falling back to local. local's options set the chunk size, the TTL and
// the class thresholds; a TTL of zero is kept in Redis for a week.
func (r *Redis) Index(name string, local *Index) *SharedIndex {
	return &SharedIndex{redis: r, local: local, prefix: "tandem:" + name + ":"}
}

// Classify is Index.Classify against the shared index. It waits at most the
// Redis timeout; the local index answers when Redis does not.
func (s *SharedIndex) Classify(prompt []byte) (class string, reuse float64) {
	class, reuse = s.local.Classify(prompt)
	if len(prompt) == 0 {
		return class, reuse
	}
	if !s.redis.allow() {
		s.redis.onFallback()
		return class, reuse
	}
	keys, ends := s.keys(prompt)
	ttl := s.local.opts.TTL
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.redis.timeout)
	defer cancel()
	found, err := lookup.Run(ctx, s.redis.client, keys, ttl.Milliseconds()).Int()
	if err == nil && (found < 0 || found > len(keys)) {
		err = fmt.Errorf("classify: the Redis script answered %d for %d keys", found, len(keys))
	}
	s.redis.report(err)
	if err != nil {
		s.redis.onFallback()
		return class, reuse
	}
	reused := 0
	if found > 0 {
		reused = ends[found-1]
	}
	return s.local.opts.class(reused, len(prompt))
}

// keyDomain starts every hashed prefix, so that tandem's keys hash nothing
// but tandem's prefixes.
const keyDomain = "tandem prefix index v1\x00"

// keys returns the Redis keys of prompt's prefixes that end at a chunk
// boundary or at the prompt's end, shortest first, and where each ends. A
// key is the index's prefix and the first 8 bytes of the SHA-256 of
// keyDomain and the prompt's prefix: the same on every replica.
func (s *SharedIndex) keys(prompt []byte) (keys []string, ends []int) {
	chunk := s.local.opts.ChunkBytes
	chunks := (len(prompt) + chunk - 1) / chunk
	stride := 1
	for chunks > stride*MaxSharedKeys {
		stride *= 2
	}
	n := min(chunks/stride+1, MaxSharedKeys)
	keys, ends = make([]string, 0, n), make([]int, 0, n)
	for c := stride; c*chunk < len(prompt); c += stride {
		ends = append(ends, c*chunk)
	}
	ends = append(ends, len(prompt))
	h := sha256.New()
	h.Write([]byte(keyDomain))
	var sum [sha256.Size]byte
	key := make([]byte, len(s.prefix)+8)
	copy(key, s.prefix)
	at := 0
	for _, end := range ends {
		h.Write(prompt[at:end])
		at = end
		copy(key[len(s.prefix):], h.Sum(sum[:0]))
		keys = append(keys, string(key))
	}
	return keys, ends
}
