package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// handlersSources is the sources document of these tests: billing is a
// Stripe source with a route of its own, shop one with none.
const handlersSources = `{"sources":{
  "billing": {"kind":"stripe","secrets":["whsec_billing_0123456789abcdef"]},
  "shop":    {"kind":"stripe","secrets":["whsec_shop_0123456789abcdef0123"]},
  "orders":  {"kind":"square","secrets":["square-key_01234"],"notification_url":"https://hooks.example.com/webhooks/orders"}
}}`

func nop(context.Context, pgx.Tx, *processor.Event) error { return nil }

// exampleRoutes stands for the registered handler packages: the tests do
// not depend on which ones shared/handlers registers.
func exampleRoutes(r *processor.Registry) {
	r.HandleFunc(processor.Kind("stripe"), "invoice.paid", nop)
	r.HandleFunc(processor.Kind("stripe"), "invoice.payment_failed", nop)
	r.HandleFunc(processor.Kind("square"), processor.AnyType, nop)
	r.HandleFunc(processor.Source("billing"), "invoice.paid", nop)
}

func duplicateRoutes(r *processor.Registry) {
	exampleRoutes(r)
	r.HandleFunc(processor.Kind("stripe"), "invoice.paid", nop)
}

// runHandlers runs webhookctl handlers, wiring register, in env.
func runHandlers(t *testing.T, register func(*processor.Registry), env map[string]string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	for _, c := range root.Commands() {
		if c.Name() == "handlers" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newHandlersCmd(register))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"handlers"}, args...))
	ctx := withEnv(withStackDir(context.Background(), t.TempDir()), func(k string) string { return env[k] })
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// sites makes the registration sites' line numbers stable.
var sites = regexp.MustCompile(`handlers_test\.go:\d+`)

func TestHandlersListsRoutesInPrecedence(t *testing.T) {
	t.Parallel()
	out, err := runHandlers(t, exampleRoutes, map[string]string{source.EnvSources: handlersSources})
	if err != nil {
		t.Fatal(err)
	}
	const want = `4 routes, in the order the processor tries them

ROUTE                                     REGISTERED BY
source billing, type invoice.paid         cmd/webhookctl.exampleRoutes (handlers_test.go:N)
kind square, any type                     cmd/webhookctl.exampleRoutes (handlers_test.go:N)
kind stripe, type invoice.paid            cmd/webhookctl.exampleRoutes (handlers_test.go:N)
kind stripe, type invoice.payment_failed  cmd/webhookctl.exampleRoutes (handlers_test.go:N)
(no fallback: an event no route matches follows PROCESSOR_UNHANDLED)

3 sources from WEBHOOK_SOURCES, each event type and the route it goes to

SOURCE   KIND    TYPE                    ROUTE                                     REGISTERED BY
billing  stripe  invoice.paid            source billing, type invoice.paid         cmd/webhookctl.exampleRoutes (handlers_test.go:N)
billing  stripe  invoice.payment_failed  kind stripe, type invoice.payment_failed  cmd/webhookctl.exampleRoutes (handlers_test.go:N)
billing  stripe  (any other type)        unhandled (PROCESSOR_UNHANDLED)
orders   square  (any other type)        kind square, any type                     cmd/webhookctl.exampleRoutes (handlers_test.go:N)
shop     stripe  invoice.paid            kind stripe, type invoice.paid            cmd/webhookctl.exampleRoutes (handlers_test.go:N)
shop     stripe  invoice.payment_failed  kind stripe, type invoice.payment_failed  cmd/webhookctl.exampleRoutes (handlers_test.go:N)
shop     stripe  (any other type)        unhandled (PROCESSOR_UNHANDLED)

1 kind route shadowed by a route by source name (an intended override, or a mistake):
  route source billing, type invoice.paid (by cmd/webhookctl.exampleRoutes (handlers_test.go:N)) shadows route kind stripe, type invoice.paid (by cmd/webhookctl.exampleRoutes (handlers_test.go:N)) for the events of source billing
`
	if got := sites.ReplaceAllString(out, "handlers_test.go:N"); got != want {
		t.Errorf("handlers printed\n%s\nwant\n%s", got, want)
	}

	// The same as JSON, for scripts.
	out, err = runHandlers(t, exampleRoutes, map[string]string{source.EnvSources: handlersSources}, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep handlersReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Routes) != 4 || len(rep.Shadows) != 1 {
		t.Errorf("JSON with %d routes, %d shadows, want 4 and 1: %s", len(rep.Routes), len(rep.Shadows), out)
	} else {
		field.Check(t, "JSON",
			field.Eq("Routes[0].Source", rep.Routes[0].Source, "billing"),
			field.Eq("Routes[1].Kind", rep.Routes[1].Kind, "square"),
			field.Eq("Routes[1].Type", rep.Routes[1].Type, processor.AnyType),
			field.Eq("len(Sources)", len(rep.Sources), 3),
			field.Eq("Shadows[0].Shadows.Route", rep.Shadows[0].Shadows.Route, "kind stripe, type invoice.paid"),
		)
	}
}

// A route registered twice fails the command with the processor's one line.
func TestHandlersRefusesADuplicate(t *testing.T) {
	t.Parallel()
	out, err := runHandlers(t, duplicateRoutes, map[string]string{source.EnvSources: handlersSources})
	if err == nil {
		t.Fatalf("a duplicate route was listed:\n%s", out)
	}
	want := regexp.MustCompile(`^processor: route kind stripe, type invoice\.paid registered twice: by cmd/webhookctl\.exampleRoutes \(handlers_test\.go:\d+\) and by cmd/webhookctl\.duplicateRoutes \(handlers_test\.go:\d+\)$`)
	if !want.MatchString(err.Error()) {
		t.Errorf("err = %q", err)
	}
}

// A sources document configured but missing is an error, not a silent
// omission; a remote flag is refused, since the handlers are this binary's.
func TestHandlersRefusesAMissingDocumentAndRemote(t *testing.T) {
	t.Parallel()
	out, err := runHandlers(t, exampleRoutes, map[string]string{source.EnvSourcesFile: "/nonexistent/sources.json"})
	if err == nil {
		t.Errorf("a missing WEBHOOK_SOURCES_FILE was ignored:\n%s", out)
	}
	out, err = runHandlers(t, exampleRoutes, nil, "--stack", "webhook-inbox")
	if err == nil || !strings.Contains(err.Error(), "compiled into this webhookctl") {
		t.Errorf("--stack: %v\n%s", err, out)
	}
}

// The registered handlers list without error, every route once.
func TestHandlersListsTheRegisteredHandlers(t *testing.T) {
	t.Parallel()
	reg := processor.NewRegistry()
	handlers.Register(reg)
	out, err := runHandlers(t, handlers.Register, map[string]string{source.EnvSources: handlersSources}, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep handlersReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Routes) != len(reg.Routes()) {
		t.Errorf("%d routes listed, %d registered", len(rep.Routes), len(reg.Routes()))
	}
}
