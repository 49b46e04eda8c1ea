package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgbenchJob is one pgbench invocation: a custom script, prepared
// statements (-M prepared), Clients connections over Threads threads, for
// a duration (-T) or a number of transactions per client (-t).
type pgbenchJob struct {
	Name         string // names the script and log files
	Script       string
	Env          *Env // the cluster
	DB           string
	Clients      int
	Threads      int
	Duration     time.Duration // -T, when Transactions is 0
	Transactions int           // -t: per client
	// Vars are pgbench variables (-D): strings the script refers to as
	// :name, sent as parameters of the prepared statement.
	Vars map[string]string
	// Latencies asks for the per-transaction log (-l), from which the
	// latency percentiles are computed.
	Latencies bool
}

// pgbenchResult is what one invocation measured.
type pgbenchResult struct {
	Transactions int
	// TPS is pgbench's own figure, without the initial connection time.
	TPS       float64
	Seconds   float64 // Transactions / TPS: the measured time
	Latencies []time.Duration
	// CPU is pgbench's own CPU time (user and system).
	CPU time.Duration
}

var (
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
)

// pgbench runs job and parses its report and, when asked, its
// per-transaction log.
func (b *bench) pgbench(ctx context.Context, job pgbenchJob) (pgbenchResult, error) {
	var res pgbenchResult
	dir, err := os.MkdirTemp(b.tmp, "pgbench-"+job.Name+"-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, job.Name+".sql")
	if err := os.WriteFile(script, []byte(job.Script), 0o644); err != nil {
		return res, fmt.Errorf("write pgbench script: %w", err)
	}
	args := []string{
		"--no-vacuum", "--protocol=prepared",
		"--client=" + strconv.Itoa(job.Clients), "--jobs=" + strconv.Itoa(min(job.Threads, job.Clients)),
		"--file=" + script,
		"--host=127.0.0.1", "--port=" + strconv.Itoa(job.Env.Cluster.Port()), "--username=postgres",
	}
	if job.Transactions > 0 {
		args = append(args, "--transactions="+strconv.Itoa(job.Transactions))
	} else {
		args = append(args, "--time="+strconv.Itoa(max(1, int(job.Duration.Round(time.Second)/time.Second))))
	}
	if job.Latencies {
		args = append(args, "--log", "--log-prefix="+filepath.Join(dir, "txlog"))
	}
	keys := make([]string, 0, len(job.Vars))
	for k := range job.Vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--define="+k+"="+job.Vars[k])
	}
	args = append(args, job.DB)

	cmd := exec.CommandContext(ctx, job.Env.Pgbench, args...)
	cmd.Dir = dir
	// Only what pgbench needs: a developer's PGHOST or PGOPTIONS must not
	// change what is measured.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("pgbench %s: %w\n%s", job.Name, err, out.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	text := out.String()
	m := pgbenchTPS.FindStringSubmatch(text)
	n := pgbenchProcessed.FindStringSubmatch(text)
	if m == nil || n == nil {
		return res, fmt.Errorf("pgbench %s: no tps or transaction count in its report:\n%s", job.Name, text)
	}
	res.TPS, _ = strconv.ParseFloat(m[1], 64)
	res.Transactions, _ = strconv.Atoi(n[1])
	if f := pgbenchFailed.FindStringSubmatch(text); f != nil && f[1] != "0" {
		return res, fmt.Errorf("pgbench %s: %s failed transactions:\n%s", job.Name, f[1], text)
	}
	if res.TPS <= 0 || res.Transactions == 0 {
		return res, fmt.Errorf("pgbench %s: nothing processed:\n%s", job.Name, text)
	}
	res.Seconds = float64(res.Transactions) / res.TPS
	if job.Latencies {
		if res.Latencies, err = readTxLogs(dir, "txlog"); err != nil {
			return res, fmt.Errorf("pgbench %s: %w", job.Name, err)
		}
		slices.Sort(res.Latencies)
	}
	return res, nil
}

// readTxLogs reads pgbench's per-transaction logs (one file per thread,
// prefix.PID and prefix.PID.N), whose third field is the transaction's
// latency in microseconds.
func readTxLogs(dir, prefix string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, prefix+".*"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no per-transaction log in %s", dir)
	}
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: bad latency %q", name, fields[2])
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
	return lat, nil
}
