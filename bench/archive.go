package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// ArchiveFigure is the archive table.
type ArchiveFigure struct {
	Events int `json:"events"`
	// Measure is of events per second; MBPerSec of raw body megabytes
	// (10^6 bytes) moved out of Postgres per second.
	Measure  Measure `json:"measure"`
	MBPerSec float64 `json:"body_mb_per_sec_median"`
	// Requests per 1 000 events, counted on the wire by method.
	PutsPer1000  float64 `json:"puts_per_1000"`
	HeadsPer1000 float64 `json:"heads_per_1000"`
	OtherPer1000 float64 `json:"other_requests_per_1000"`
	Objects      int     `json:"objects"`
	BodyBytes    int64   `json:"body_bytes"`
	ObjectBytes  int64   `json:"object_bytes"`
	// Sizes of webhook_events (pg_total_relation_size: heap, TOAST,
	// indexes), before the run, right after it, after VACUUM and after
	// VACUUM FULL.
	TableBefore          int64 `json:"table_bytes_before"`
	TableAfter           int64 `json:"table_bytes_after"`
	TableAfterVacuum     int64 `json:"table_bytes_after_vacuum"`
	TableAfterVacuumFull int64 `json:"table_bytes_after_vacuum_full"`
}

// requestCounter is a loopback proxy in front of the S3 server, counting
// requests by method: the archiver reaches it through its endpoint, the
// setting its users have, so blobstore carries no hook for the bench. The
// extra loopback hop per request is small beside a batch's database work.
type requestCounter struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
}

func newRequestCounter(endpoint string) (*requestCounter, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3 endpoint %q: %w", endpoint, err)
	}
	// The Host header goes on unchanged, so the request's signature
	// still verifies.
	proxy := httputil.NewSingleHostReverseProxy(target)
	c := &requestCounter{n: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.Method]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	return c, nil
}

func (c *requestCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// archive stores the drain's events processed a day ago and archives them
// all, as the archiver Lambda does (batches of 1 000, one object each), to
// versitygw, once per run.
func (b *bench) archive(ctx context.Context) error {
	n := b.s.DrainEvents
	cfg := b.env.S3.BlobConfig(archiveBucket)
	counter, err := newRequestCounter(cfg.Endpoint)
	if err != nil {
		return err
	}
	defer counter.srv.Close()
	cfg.Endpoint = counter.srv.URL
	blobs, err := blobstore.Open(ctx, cfg)
	if err != nil {
		return err
	}
	t := target{b.env, dbDrain}
	pool, err := storage.PoolConfig{URL: t.URL(), ApplicationName: "bench-archiver", MaxConns: 2}.Open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	fig := ArchiveFigure{Events: n}
	var runs []Run
	var mbps []float64
	for i := range b.s.DrainRuns {
		if err := b.loadEvents(ctx, t, n, loadOpts{Processed: true}); err != nil {
			return err
		}
		before, err := tableSize(ctx, pool)
		if err != nil {
			return err
		}
		a, err := archive.New(archive.Config{
			Prefix: "archive/run" + fmt.Sprint(i+1), MinAge: time.Hour, BatchSize: b.s.ArchiveBatch,
		}, archive.Deps{Store: storage.New(pool), Blobs: blobs})
		if err != nil {
			return err
		}
		counter.reset()
		u0 := t.snapshot(ctx)
		res, err := a.RunOnce(ctx)
		if err != nil {
			return fmt.Errorf("archive run %d: %w", i+1, err)
		}
		u1 := t.snapshot(ctx)
		reqs := counter.reset()
		if res.Events != n {
			return fmt.Errorf("archive run %d archived %d events, want %d", i+1, res.Events, n)
		}
		after, err := tableSize(ctx, pool)
		if err != nil {
			return err
		}
		secs := u1.At.Sub(u0.At).Seconds()
		r := Run{Events: n, Seconds: secs, EventsPerSec: float64(n) / secs}
		r.costs(u0, u1, 0)
		runs = append(runs, r)
		mbps = append(mbps, float64(res.BodyBytes)/1e6/secs)
		k := float64(n) / 1000
		fig.PutsPer1000 = float64(reqs[http.MethodPut]) / k
		fig.HeadsPer1000 = float64(reqs[http.MethodHead]) / k
		fig.OtherPer1000 = float64(sum(reqs)-reqs[http.MethodPut]-reqs[http.MethodHead]) / k
		fig.Objects, fig.BodyBytes, fig.ObjectBytes = res.Batches, res.BodyBytes, res.ObjectBytes
		fig.TableBefore, fig.TableAfter = before, after
		b.log.Info("archive", "run", i+1, "events_per_sec", int(r.EventsPerSec), "body_mb_per_sec", fmt.Sprintf("%.1f", mbps[len(mbps)-1]))
	}
	for _, q := range []struct {
		sql  string
		size *int64
	}{{`VACUUM webhook_events`, &fig.TableAfterVacuum}, {`VACUUM FULL webhook_events`, &fig.TableAfterVacuumFull}} {
		if _, err := pool.Exec(ctx, q.sql); err != nil {
			return fmt.Errorf("%s: %w", q.sql, err)
		}
		if *q.size, err = tableSize(ctx, pool); err != nil {
			return err
		}
	}
	fig.Measure = summarize(runs)
	fig.MBPerSec = median(mbps)
	b.rep.Archive = &fig
	return nil
}

func sum(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// tableSize returns webhook_events' total size: heap, TOAST and indexes.
func tableSize(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('webhook_events')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("table size: %w", err)
	}
	return n, nil
}
