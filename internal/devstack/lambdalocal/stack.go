package lambdalocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/devtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/schemaresource"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// StackOptions configures StartStack.
type StackOptions struct {
	// Template is the SAM template; its functions are built and run.
	Template *samtemplate.Template
	// RepoRoot is where the Makefile is.
	RepoRoot string
	// Dir receives the binaries and the emulators' logs.
	Dir string
	// Env overrides each function's template environment ("K=V" by
	// function logical id; "*" applies to every function). Template
	// variables naming Secrets Manager secrets (*_SECRET_ARN) are dropped:
	// locally, the values come from these overrides instead.
	Env map[string][]string
	// Logger reports invocation failures of the front; nil discards.
	Logger *slog.Logger
	// DatabaseURL, when set, is the database, as its owner, and the stack
	// starts as CloudFormation deploys it: the migration function first
	// (MigrationFunction, built by its Makefile target whether or not the
	// template declares it), sent the DatabaseSchema resource's Create in
	// password mode, each role's secret served by a local Secrets Manager
	// (localsecrets) with a fresh random password; then each function,
	// connected as its own role (FunctionRoles) with the password the
	// migrator set. Without it the functions get Env's DATABASE_URL and
	// nothing is migrated.
	DatabaseURL string
	// IAM authorizes the requests to the functions' URLs as Lambda does
	// for AuthType AWS_IAM; needed when a function has a function URL.
	IAM *iamlocal.Verifier
	// URLTargets names, by function logical id, the target each function
	// URL stands for in IAM's identities (which may invoke it); every
	// function with a function URL needs one.
	URLTargets map[string]string
}

// Stack is every function of a template running under the emulator, with
// the API front serving the template's routes.
type Stack struct {
	Functions map[string]*Emulator
	Front     http.Handler
	// URLs are the functions' function URLs, by logical id (those whose
	// template declares FunctionUrlConfig), each an http.Handler to serve
	// on its own listener as Lambda serves each on its own domain.
	URLs map[string]http.Handler
	// Migrator is the migration function, after the Create it answered
	// SUCCESS (DatabaseURL set; nil otherwise); Schema is that answer.
	Migrator *Emulator
	Schema   Answer
	// Secrets serves the roles' secrets to the migrator (DatabaseURL set).
	Secrets *localsecrets.Server
	// RoleURLs are the database URLs each function was given, by logical
	// id: its own role and password (DatabaseURL set).
	RoleURLs map[string]string
	tpl      *samtemplate.Template
}

// MigrationFunctionID is the migration function's logical id, and
// SchemaResourceID the custom resource's it answers for.
const (
	MigrationFunctionID = "MigrationFunction"
	SchemaResourceID    = "DatabaseSchema"
)

// FunctionRoles maps each serving function to its database role.
var FunctionRoles = map[string]string{
	"ReceiverFunction":  migrate.RoleReceiver,
	"ProcessorFunction": migrate.RoleProcessor,
	"ArchiverFunction":  migrate.RoleArchiver,
	// The operator function's two deployments: the read-only one and the
	// one that may act.
	"OperatorReadFunction": migrate.RoleOperatorRead,
	"OperatorFunction":     migrate.RoleOperator,
}

// SecretARN is the local ARN of role's secret.
func SecretARN(role string) string {
	return "arn:aws:secretsmanager:us-east-1:000000000000:secret:webhook-inbox-local-" + role
}

// StartStack builds every function of the template with its Makefile
// target and starts each under the Runtime Interface Emulator, after the
// migration function when o.DatabaseURL is set.
func StartStack(ctx context.Context, o StackOptions) (*Stack, error) {
	if err := checkURLs(o); err != nil {
		return nil, err
	}
	rie, err := devtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		return nil, err
	}
	// The migration function serves no route or schedule: CloudFormation
	// invokes it, and so does migrate below.
	var ids []string
	for _, id := range o.Template.FunctionIDs() {
		if id != MigrationFunctionID {
			ids = append(ids, id)
		}
	}
	build := ids
	if o.DatabaseURL != "" {
		build = append([]string{MigrationFunctionID}, ids...)
	}
	bins, err := Build(ctx, o.RepoRoot, o.Dir, build)
	if err != nil {
		return nil, err
	}
	s := &Stack{Functions: map[string]*Emulator{}, URLs: map[string]http.Handler{}, tpl: o.Template}
	roleEnv := map[string][]string{}
	if o.DatabaseURL != "" {
		if roleEnv, err = s.migrate(ctx, o, rie, bins[MigrationFunctionID]); err != nil {
			s.Close()
			return nil, err
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var routes []Route
	for _, id := range ids {
		fn := o.Template.Functions[id]
		overrides := append(append(append([]string(nil), o.Env["*"]...), o.Env[id]...), roleEnv[id]...)
		em, err := StartEmulator(ctx, EmulatorOptions{
			Name: id, RIE: rie, Bootstrap: bins[id], Env: localEnv(fn.Environment, overrides),
			Timeout: fn.Timeout, MemoryMB: fn.MemorySize, LogPath: filepath.Join(o.Dir, id+".log"),
		})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Functions[id] = em
		for _, r := range fn.Routes {
			routes = append(routes, Route{Method: r.Method, Path: r.Path, Function: em})
		}
		if fn.URL != nil {
			if s.URLs[id], err = NewFunctionURL(em, *fn.URL, o.URLTargets[id], o.IAM, log); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	s.Front = NewFront(routes, log)
	return s, nil
}

// checkURLs refuses, before anything is built, a function URL the local
// stack cannot serve as Lambda would, and a target named for a function
// that has none.
func checkURLs(o StackOptions) error {
	var errs []error
	for _, id := range o.Template.FunctionIDs() {
		u := o.Template.Functions[id].URL
		switch {
		case u == nil || id == MigrationFunctionID:
		case u.AuthType != "AWS_IAM":
			errs = append(errs, fmt.Errorf("lambdalocal: %s: function URL AuthType %s: only AWS_IAM is served locally", id, u.AuthType))
		case u.InvokeMode != "BUFFERED":
			errs = append(errs, fmt.Errorf("lambdalocal: %s: function URL InvokeMode %s: only BUFFERED is served locally", id, u.InvokeMode))
		case o.IAM == nil:
			errs = append(errs, fmt.Errorf("lambdalocal: %s has a function URL: StackOptions.IAM must verify its requests", id))
		case o.URLTargets[id] == "":
			errs = append(errs, fmt.Errorf("lambdalocal: %s has a function URL: StackOptions.URLTargets must name its target", id))
		}
	}
	for id := range o.URLTargets {
		if fn, ok := o.Template.Functions[id]; !ok || fn.URL == nil {
			errs = append(errs, fmt.Errorf("lambdalocal: URLTargets names %s, which has no function URL in the template", id))
		}
	}
	return errors.Join(errs...)
}

// migrate does what CloudFormation does before the functions that depend
// on the schema: it generates each role's secret, runs the migration
// function and sends it the schema resource's Create, which must answer
// SUCCESS. It returns each function's database environment.
func (s *Stack) migrate(ctx context.Context, o StackOptions, rie, bootstrap string) (map[string][]string, error) {
	admin, err := url.Parse(o.DatabaseURL)
	if err != nil || (admin.Scheme != "postgres" && admin.Scheme != "postgresql") {
		return nil, errors.New("lambdalocal: DatabaseURL must be a postgres:// URL")
	}
	if s.Secrets, err = localsecrets.Start(); err != nil {
		return nil, err
	}
	props := map[string]any{
		"ServiceToken": "arn:aws:lambda:us-east-1:000000000000:function:" + MigrationFunctionID,
		"Auth":         string(migrate.AuthPassword), "Release": "local",
	}
	passwords := map[string]string{}
	for prop, role := range map[string]string{
		schemaresource.PropReceiverSecretArn: migrate.RoleReceiver, schemaresource.PropProcessorSecretArn: migrate.RoleProcessor,
		schemaresource.PropArchiverSecretArn: migrate.RoleArchiver, schemaresource.PropOperatorReadSecretArn: migrate.RoleOperatorRead,
		schemaresource.PropOperatorSecretArn: migrate.RoleOperator,
	} {
		passwords[role] = randomID() // as GenerateSecretString would
		doc, _ := json.Marshal(map[string]string{"username": role, "password": passwords[role]})
		s.Secrets.Put(SecretARN(role), string(doc))
		props[prop] = SecretARN(role)
	}

	var tmplEnv map[string]string
	timeout := 5 * time.Minute
	if fn, ok := o.Template.Functions[MigrationFunctionID]; ok {
		tmplEnv = fn.Environment
		if fn.Timeout > 0 {
			timeout = fn.Timeout
		}
	}
	overrides := append(append(append([]string(nil), o.Env["*"]...), o.Env[MigrationFunctionID]...), s.Secrets.Env()...)
	overrides = append(overrides, databaseEnv(o.DatabaseURL)...)
	if s.Migrator, err = StartEmulator(ctx, EmulatorOptions{
		Name: MigrationFunctionID, RIE: rie, Bootstrap: bootstrap, Env: localEnv(tmplEnv, overrides),
		Timeout: timeout, LogPath: filepath.Join(o.Dir, MigrationFunctionID+".log"),
	}); err != nil {
		return nil, err
	}
	answer, _, err := InvokeCustomResource(ctx, s.Migrator, cfn.Event{
		RequestType: cfn.RequestCreate, ResourceType: "Custom::DatabaseSchema", LogicalResourceID: SchemaResourceID,
		StackID: "arn:aws:cloudformation:us-east-1:000000000000:stack/webhook-inbox-local/" + randomID(), ResourceProperties: props,
	})
	if err != nil {
		return nil, fmt.Errorf("lambdalocal: the migration function: %w\n%s", err, tail(s.Migrator.LogPath()))
	}
	s.Schema = answer
	resp, err := answer.Response()
	if err != nil || resp["Status"] != "SUCCESS" {
		return nil, fmt.Errorf("lambdalocal: the migration function answered %s (%v)\n%s", answer.Body, err, tail(s.Migrator.LogPath()))
	}

	s.RoleURLs = map[string]string{}
	env := map[string][]string{}
	for id, role := range FunctionRoles {
		u := *admin
		u.User = url.UserPassword(role, passwords[role])
		s.RoleURLs[id] = u.String()
		env[id] = databaseEnv(u.String())
	}
	return env, nil
}

// databaseEnv points a function at dbURL, blanking what the template may
// say of its database in AWS (the proxy's host, IAM), which would
// otherwise fill in or replace parts of the URL.
func databaseEnv(dbURL string) []string {
	return []string{"DATABASE_URL=" + dbURL, "DATABASE_HOST=", "DATABASE_PORT=", "DATABASE_NAME=", "DATABASE_USER=", "DATABASE_IAM_AUTH="}
}

// localEnv is the template's environment without secret references, then
// the overrides.
func localEnv(tmpl map[string]string, overrides []string) []string {
	keys := make([]string, 0, len(tmpl))
	for k := range tmpl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var env []string
	for _, k := range keys {
		if strings.HasSuffix(k, "_SECRET_ARN") {
			continue
		}
		env = append(env, k+"="+tmpl[k])
	}
	// Drop the keys being overridden rather than relying on which of two
	// duplicate entries a program's getenv returns.
	over := map[string]bool{}
	for _, kv := range overrides {
		k, _, _ := strings.Cut(kv, "=")
		over[k] = true
	}
	out := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !over[k] {
			out = append(out, kv)
		}
	}
	return append(out, overrides...)
}

// Schedules returns, per function, the rules of its Schedule events.
func (s *Stack) Schedules() map[string][]samtemplate.Schedule {
	out := map[string][]samtemplate.Schedule{}
	for id, fn := range s.tpl.Functions {
		for _, sc := range fn.Schedules {
			if sc.Enabled {
				out[id] = append(out[id], sc)
			}
		}
	}
	return out
}

// Fire invokes every schedule of function id once.
func (s *Stack) Fire(ctx context.Context, id string) ([]byte, error) {
	em, ok := s.Functions[id]
	if !ok {
		return nil, fmt.Errorf("no function %s", id)
	}
	var last []byte
	for _, sc := range s.Schedules()[id] {
		out, err := InvokeSchedule(ctx, em, sc.Event)
		if err != nil {
			return out, err
		}
		last = out
	}
	return last, nil
}

// RunSchedules fires each schedule at its template rate, or every
// `every` when that is shorter and not zero, until ctx ends.
func (s *Stack) RunSchedules(ctx context.Context, every time.Duration, log *slog.Logger) error {
	var wg sync.WaitGroup
	var errs []error
	var mu sync.Mutex
	for id, scs := range s.Schedules() {
		for _, sc := range scs {
			period, err := samtemplate.ParseRate(sc.Expression)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
				mu.Unlock()
				continue
			}
			if every > 0 && every < period {
				period = every
			}
			em, rule := s.Functions[id], sc.Event
			wg.Go(func() {
				t := time.NewTicker(period)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					if out, err := InvokeSchedule(ctx, em, rule); err != nil && ctx.Err() == nil {
						log.Error("local schedule: invocation failed", "function", em.Name, "rule", rule, "err", err)
					} else if ctx.Err() == nil {
						log.Info("local schedule fired", "function", em.Name, "rule", rule, "result", string(out))
					}
				}
			})
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	wg.Wait()
	return nil
}

// InitDurations returns each function's init duration as reported by the
// emulator (known once the function has been invoked).
func (s *Stack) InitDurations() map[string]time.Duration {
	out := map[string]time.Duration{}
	for id, em := range s.Functions {
		if d, ok := em.InitDuration(); ok {
			out[id] = d
		}
	}
	return out
}

// Serve serves the front on ln until ctx ends.
func (s *Stack) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Front, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops every emulator and the secrets' server.
func (s *Stack) Close() {
	for _, em := range s.Functions {
		_ = em.Close()
	}
	if s.Migrator != nil {
		_ = s.Migrator.Close()
	}
	if s.Secrets != nil {
		_ = s.Secrets.Close()
	}
}
