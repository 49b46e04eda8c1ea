package lambdalocal_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/devtools"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/shared/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/sender"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const sources = `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_local_test"]}}}`

func TestReceiverUnderTheEmulator(t *testing.T) {
	ctx := context.Background()
	root, err := devtools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{"DatabaseUrl": "unused", "SourcesDocument": "{}"})
	if err != nil {
		t.Fatal(err)
	}
	rie, err := devtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bins, err := lambdalocal.Build(ctx, root, dir, []string{"ReceiverFunction"})
	if err != nil {
		t.Fatal(err)
	}
	fn := tpl.Functions["ReceiverFunction"]
	em, err := lambdalocal.StartEmulator(ctx, lambdalocal.EmulatorOptions{
		Name: "ReceiverFunction", RIE: rie, Bootstrap: bins["ReceiverFunction"],
		Env:     []string{"DATABASE_URL=" + pgtest.URL(t), "WEBHOOK_SOURCES=" + sources},
		Timeout: fn.Timeout, MemoryMB: fn.MemorySize, LogPath: filepath.Join(dir, "receiver.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	var routes []lambdalocal.Route
	for _, r := range fn.Routes {
		routes = append(routes, lambdalocal.Route{Method: r.Method, Path: r.Path, Function: em})
	}
	front, err := lambdalocal.NewFront(routes, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(front)
	defer srv.Close()

	set, _ := source.Parse([]byte(sources))
	src, _ := set.Lookup("stripe")
	req, _ := sender.Sample(src, time.Now())
	code, body, err := req.Post(ctx, srv.Client(), srv.URL)
	if err != nil || code != 200 {
		t.Fatalf("post: %d %s %v\n%s", code, body, err, em.LogPath())
	}
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	if out["status"] != "accepted" {
		t.Fatalf("answer: %s", body)
	}
	d, ok := em.InitDuration()
	t.Logf("ReceiverFunction init duration: %v (%v)", d, ok)
}
