package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
)

// lambdaFunctions are the template's functions, in the order measured.
var lambdaFunctions = []string{"ReceiverFunction", "ProcessorFunction", "ArchiverFunction"}

// coldStarts is how many cold starts each function gets.
const coldStarts = 3

// LambdaFigure is one function's line of the Lambda table.
type LambdaFigure struct {
	Function string `json:"function"`
	// Arm64Bytes is the deployed binary (the Makefile's default
	// LAMBDA_GOARCH); NativeBytes the one built for this machine, which is
	// the one run under the emulator.
	Arm64Bytes  int64  `json:"arm64_bytes"`
	NativeBytes int64  `json:"native_bytes"`
	NativeArch  string `json:"native_arch"`
	// InitMs are the init durations of the cold starts as the emulator
	// reported them; the median, min and max follow.
	InitMs       []float64 `json:"init_ms"`
	InitMsMedian float64   `json:"init_ms_median"`
	InitMsMin    float64   `json:"init_ms_min"`
	InitMsMax    float64   `json:"init_ms_max"`
}

// lambda builds each function's bootstrap with its Makefile target, for
// arm64 (as deployed) and for this machine, and cold-starts the latter
// under the Runtime Interface Emulator a few times, invoking it once each.
// A function whose Makefile target does not exist yet is skipped.
func (b *bench) lambda(ctx context.Context) error {
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		return err
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return fmt.Errorf("read Makefile: %w", err)
	}
	var ids []string
	for _, id := range lambdaFunctions {
		if regexp.MustCompile(`(?m)^build-` + id + `:`).Match(mk) {
			ids = append(ids, id)
		} else {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("%s skipped: the Makefile has no build-%s target.", id, id))
		}
	}
	rie, err := pinnedtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		return err
	}
	dir := filepath.Join(b.tmp, "lambda")
	native, err := lambdalocal.Build(ctx, root, filepath.Join(dir, "native"), ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		fig := LambdaFigure{Function: id, NativeArch: runtime.GOARCH}
		if fig.NativeBytes, err = fileSize(native[id]); err != nil {
			return err
		}
		arm := filepath.Join(dir, "arm64", id)
		if err := os.MkdirAll(arm, 0o755); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "build-"+id, "ARTIFACTS_DIR="+arm, "LAMBDA_GOARCH=arm64")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("make build-%s for arm64: %w\n%s", id, err, out)
		}
		if fig.Arm64Bytes, err = fileSize(filepath.Join(arm, "bootstrap")); err != nil {
			return err
		}
		for i := range coldStarts {
			d, err := b.coldStart(ctx, rie, id, native[id], filepath.Join(dir, id+"-"+strconv.Itoa(i)+".log"))
			if err != nil {
				return err
			}
			fig.InitMs = append(fig.InitMs, float64(d)/float64(time.Millisecond))
		}
		fig.InitMsMedian = median(fig.InitMs)
		fig.InitMsMin, fig.InitMsMax = minMax(fig.InitMs)
		b.rep.Lambda = append(b.rep.Lambda, fig)
		b.log.Info("lambda", "function", id, "arm64_bytes", fig.Arm64Bytes, "init_ms", fmt.Sprintf("%.1f", fig.InitMsMedian))
	}
	return nil
}

// coldStart starts the function under the emulator, invokes it once (a
// signed webhook through an API Gateway v2 event for the receiver, a
// scheduled event for the others) and returns the init duration the
// emulator reported.
func (b *bench) coldStart(ctx context.Context, rie, id, bootstrap, logPath string) (time.Duration, error) {
	env := []string{"DATABASE_URL=" + b.env.URL(dbLambda), "LOG_LEVEL=info"}
	switch id {
	case "ReceiverFunction":
		env = append(env, "WEBHOOK_SOURCES="+sourcesDoc)
	case "ArchiverFunction":
		env = append(env, "ARCHIVE_BUCKET="+archiveBucket, "ARCHIVE_PREFIX=lambda",
			"S3_ENDPOINT="+b.env.S3.Endpoint(), "S3_ACCESS_KEY_ID="+locals3.AccessKeyID,
			"S3_SECRET_ACCESS_KEY="+locals3.SecretAccessKey, "AWS_REGION="+locals3.Region)
	}
	em, err := lambdalocal.StartEmulator(ctx, lambdalocal.EmulatorOptions{
		Name: id, RIE: rie, Bootstrap: bootstrap, Env: env, Timeout: time.Minute, MemoryMB: 256, LogPath: logPath,
	})
	if err != nil {
		return 0, err
	}
	defer em.Close()
	if id == "ReceiverFunction" {
		err = b.invokeReceiver(ctx, em)
	} else {
		_, err = lambdalocal.InvokeSchedule(ctx, em, "Schedule")
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", id, err)
	}
	d, ok := em.InitDuration()
	if !ok {
		return 0, fmt.Errorf("%s: the emulator reported no init duration (log %s)", id, logPath)
	}
	return d, nil
}

// invokeReceiver sends one signed Stripe event as API Gateway would.
func (b *bench) invokeReceiver(ctx context.Context, em *lambdalocal.Emulator) error {
	src, _, err := benchSource()
	if err != nil {
		return err
	}
	id := stripeID(newRand(b.s.Seed, uint64(time.Now().UnixNano())))
	body := stripeBody(id, newRand(b.s.Seed, 0))
	signed, err := sender.Sign(src, body, id, time.Now())
	if err != nil {
		return err
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/webhooks/"+sourceName, bytes.NewReader(body))
	r.Header = signed.Header
	r.SetPathValue("source", sourceName)
	ev, err := lambdalocal.NewEvent(r, "POST /webhooks/{source}")
	if err != nil {
		return err
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	out, err := em.Invoke(ctx, payload)
	if err != nil {
		return err
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("receiver answered %d: %s", resp.StatusCode, out)
	}
	return nil
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
