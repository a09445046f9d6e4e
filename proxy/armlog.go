package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// failureLog makes an arm's failures visible in tandem's log without
// flooding it: the first failure of each kind is logged at once, later ones
// are counted and summarised at most once a minute.
type failureLog struct {
	log    *slog.Logger
	config string

	mu      sync.Mutex
	seen    map[string]bool
	pending map[string]int
	last    time.Time
}

// maxFailureKinds bounds the kinds a failureLog tells apart; any more are
// counted as "other".
const maxFailureKinds = 32

const failureSummaryEvery = time.Minute

func newFailureLog(log *slog.Logger, config string) *failureLog {
	return &failureLog{log: log, config: config, seen: map[string]bool{}, pending: map[string]int{}}
}

func (f *failureLog) note(kind string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.seen[kind] {
		if len(f.seen) >= maxFailureKinds {
			kind = "other"
		} else {
			f.seen[kind] = true
			f.log.Warn("arm request failed; further failures are summarised every minute", "config", f.config, "failure", kind)
			if f.last.IsZero() {
				f.last = now
			}
			return
		}
	}
	f.pending[kind]++
	if now.Sub(f.last) < failureSummaryEvery {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(f.pending)) {
		f.log.Warn("arm requests failed", "config", f.config, "failure", k, "count", f.pending[k], "since", f.last.Format(time.RFC3339))
	}
	clear(f.pending)
	f.last = now
}

// failureOfError names a failed round trip or body read for the log, without
// the arm's address.
func failureOfError(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return "timeout (TANDEM_SHADOW_TIMEOUT)"
	case ctx.Err() != nil:
		return "canceled"
	}
	if reason := clientReason(err); reason != "request failed" {
		return reason
	}
	// Not a network error: the transport's own words, without the URL.
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return err.Error()
}

// CheckArms asks each arm once for its models (GET /v1/models with its key)
// and logs what it found, so a wrong URL, certificate or key shows at
// start-up rather than as silently failed pairs.
func (s *Server) CheckArms(ctx context.Context) {
	for _, arm := range s.arms {
		found, err := arm.models(ctx)
		if err != nil {
			s.log.Warn("arm check failed: mirrored requests to it will fail", "config", arm.config, "err", err)
			continue
		}
		s.log.Info("arm check", "config", arm.config, "models", found)
		if arm.model != "" && !slices.Contains(found, arm.model) {
			s.log.Warn("arm does not list the model it is sent", "config", arm.config, "model", arm.model, "models", found)
		}
	}
}

// maxModelsBytes bounds what the arm check reads of a /v1/models answer.
const maxModelsBytes = 1 << 20

func (u *upstream) models(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	models := u.url.JoinPath("v1", "models")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, models.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "tandem")
	if u.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+string(u.apiKey))
	}
	resp, err := u.transport.RoundTrip(req)
	if err != nil {
		return nil, errors.New(failureOfError(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("GET " + models.Path + " answered " + resp.Status)
	}
	var list struct {
		Data *[]struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBytes)).Decode(&list); err != nil || list.Data == nil {
		return nil, errors.New("GET /v1/models: not an OpenAI model list")
	}
	data := *list.Data
	ids := make([]string, 0, min(len(data), 20))
	for _, m := range data[:min(len(data), 20)] {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
