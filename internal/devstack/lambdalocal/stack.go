package lambdalocal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/google/uuid"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localevents"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localinvoke"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localscheduler"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// StackOptions configures StartStack.
type StackOptions struct {
	// Template is the SAM template, evaluated for the profile to run; its
	// functions are built and run, its custom resources created, its
	// event rules served.
	Template *samtemplate.Template
	// RepoRoot is where the Makefile is.
	RepoRoot string
	// Dir receives the binaries and the emulators' logs.
	Dir string
	// Bootstraps are bootstraps already built, by logical id (Build's
	// answer); the functions not named are built.
	Bootstraps map[string]string
	// DatabaseURL is the database, as its owner (required). The owner's
	// user and password stand for the database's master secret.
	DatabaseURL string
	// Sources is the sources document: the value of the template's
	// SourcesSecretArn, which the relay copies to the control bucket for
	// the receiver (required).
	Sources []byte
	// S3 configures the local S3 server (versitygw) that holds the
	// template's buckets; its EventWebhookURL is the stack's own, and
	// Versioning is turned on for the buckets the template versions.
	S3 locals3.Options
	// SchedulerNow is the local EventBridge Scheduler's clock, which says
	// which wake-up schedules are due; nil is time.Now.
	SchedulerNow func() time.Time
	// FireEvery, when positive, fires the due schedules at that interval
	// until Close (as the service fires them on time); at 0 only
	// Scheduler.FireDue does, which a test calls with its own clock.
	FireEvery time.Duration
	// Env overrides each function's environment ("K=V" by function
	// logical id; "*" applies to every function), after the local
	// stack's own settings; the serving functions' database settings
	// come last.
	Env map[string][]string
	// Logger reports the local services' failures; nil discards.
	Logger *slog.Logger
	// IAM authorizes the requests to the functions' URLs as Lambda does
	// for AuthType AWS_IAM; needed when a function has a function URL.
	IAM *iamlocal.Verifier
	// URLTargets names, by function logical id, the target each function
	// URL stands for in IAM's identities (which may invoke it); every
	// function with a function URL needs one.
	URLTargets map[string]string
}

// Stack is a template deployed on this machine: its buckets in a local S3
// server that notifies a local EventBridge, its secrets in a local Secrets
// Manager, a local EventBridge Scheduler and a local Lambda Invoke API,
// every function under the Runtime Interface Emulator, its custom
// resources created through their functions, as CloudFormation creates
// them, and the API front serving the template's routes.
type Stack struct {
	// Functions are every function of the template, by logical id.
	Functions map[string]*Emulator
	// Names maps each function's logical id to its name, what its
	// invocations are recorded under (the template's FunctionName, or the
	// logical id).
	Names map[string]string
	Front http.Handler
	// URLs are the functions' function URLs, by logical id (those whose
	// template declares FunctionUrlConfig), each an http.Handler to serve
	// on its own listener as Lambda serves each on its own domain.
	URLs map[string]http.Handler
	// Created holds each custom resource's answer to Create, by logical
	// id: DatabaseSchema's (the migration front's), SourcesCopy's (the
	// relay's).
	Created map[string]Answer
	// Schema is DatabaseSchema's answer to Create.
	Schema Answer

	// The local AWS services.
	Secrets   *localsecrets.Server
	Invoke    *localinvoke.Server
	Scheduler *localscheduler.Server
	Events    *localevents.Bus
	S3        *locals3.Server
	// Buckets are the template's buckets on S3, by logical id.
	Buckets map[string]blobstore.Config

	// RoleURLs are the database URLs each serving function was given, by
	// logical id: its own role and password.
	RoleURLs map[string]string
	// Bootstraps are the functions' bootstraps, by logical id, for
	// another stack's StackOptions.Bootstraps.
	Bootstraps map[string]string

	tpl     *samtemplate.Template
	env     map[string][]string
	dep     *deployment
	customs []customResource
	stackID string
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// MigrationFunctionID is the migration function's logical id (the apply
// mode, inside the VPC), MigrationFrontID its front's (the DatabaseSchema
// resource's ServiceToken), RelayFunctionID the relay's, and
// SchemaResourceID the custom resource the front answers for.
const (
	MigrationFunctionID = "MigrationFunction"
	MigrationFrontID    = "MigrationFrontFunction"
	RelayFunctionID     = "RelayFunction"
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

// The credentials every function signs its AWS requests with: the local
// services check the scope a request is signed for, not the signature.
const (
	localAccessKeyID     = "lambdalocal"
	localSecretAccessKey = "lambdalocal-secret-key"
)

// StartStack deploys the template on this machine as CloudFormation would,
// and returns once it serves: the local services and buckets first, then
// every function under the Runtime Interface Emulator (built with its
// Makefile target unless StackOptions.Bootstraps has it), the custom
// resources' Create sent to their functions (each must answer SUCCESS:
// the relay copies the sources document, the migration front has the
// migration function apply the schema and the roles), the event rules,
// and the API front.
//
// Where it departs from AWS: RDS IAM authentication is not reproduced (the
// schema resource is sent Auth=password, and each serving function
// connects as its own role with a password from its local secret, as
// DatabaseAuth=password deploys); RDS Proxy is not (the functions connect
// to the database itself); IAM policies are not checked (the translated
// template's tests check them); each function runs in one execution
// environment, so its invocations run one at a time; the database is
// reached without TLS.
func StartStack(ctx context.Context, o StackOptions) (*Stack, error) {
	if o.Template == nil {
		return nil, errors.New("lambdalocal: StackOptions.Template is required")
	}
	errs := []error{checkURLs(o)}
	admin, err := url.Parse(o.DatabaseURL)
	if err != nil || (admin.Scheme != "postgres" && admin.Scheme != "postgresql") {
		errs = append(errs, errors.New("lambdalocal: StackOptions.DatabaseURL must be a postgres:// URL, the database's owner"))
	}
	if len(o.Sources) == 0 {
		errs = append(errs, errors.New("lambdalocal: StackOptions.Sources must hold the sources document the relay copies"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res, err := o.Template.Stack.Resources()
	if err != nil {
		return nil, err
	}
	dep := newDeployment(o.Template.Stack, res, admin)
	rules, err := dep.rules(res)
	if err != nil {
		return nil, err
	}
	customs, err := dep.customResources(res)
	if err != nil {
		return nil, err
	}
	rie, err := pinnedtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Stack{Functions: map[string]*Emulator{}, URLs: map[string]http.Handler{}, Created: map[string]Answer{},
		Buckets: map[string]blobstore.Config{}, RoleURLs: map[string]string{}, tpl: o.Template, env: map[string][]string{}, dep: dep, customs: customs,
		stackID: "arn:aws:cloudformation:" + Region + ":" + Account + ":stack/" + StackName + "/" + uuid.NewString()}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := s.startServices(ctx, o, log); err != nil {
		return nil, err
	}

	// The database's secrets: the master secret (the owner, whom the
	// front reads), each role's (a fresh password, as
	// GenerateSecretString would), and the sources secret.
	ownerPassword, _ := admin.User.Password()
	if ownerPassword == "" {
		ownerPassword = "local-" + randomID() // the local owner is trusted: any password does
	}
	doc, _ := json.Marshal(map[string]string{"username": admin.User.Username(), "password": ownerPassword})
	s.Secrets.Put(AdminSecretARN, string(doc))
	if arn, _ := o.Template.Stack.Param("DatabaseAdminSecretArn").(string); arn != "" {
		s.Secrets.Put(arn, string(doc)) // existing mode: yours
	}
	sourcesARN, _ := o.Template.Stack.Param("SourcesSecretArn").(string)
	if sourcesARN == "" {
		return nil, errors.New("lambdalocal: the template has no SourcesSecretArn to hold the sources document")
	}
	s.Secrets.Put(sourcesARN, string(o.Sources))
	passwords := s.roleSecrets()
	for id, role := range FunctionRoles {
		if _, declared := o.Template.Functions[id]; !declared {
			continue
		}
		u := *admin
		u.User = url.UserPassword(role, passwords[role])
		s.RoleURLs[id] = u.String()
	}

	// Every function, built as sam build builds it.
	ids := o.Template.FunctionIDs()
	var build []string
	s.Bootstraps = maps.Clone(o.Bootstraps)
	if s.Bootstraps == nil {
		s.Bootstraps = map[string]string{}
	}
	for _, id := range ids {
		if s.Bootstraps[id] == "" {
			build = append(build, id)
		}
	}
	built, err := Build(ctx, o.RepoRoot, o.Dir, build)
	if err != nil {
		return nil, err
	}
	maps.Copy(s.Bootstraps, built)
	var routes []Route
	for _, id := range ids {
		env, err := s.environment(o, id, res[id], admin)
		if err != nil {
			return nil, err
		}
		s.env[id] = env
		fn := o.Template.Functions[id]
		em, err := StartEmulator(ctx, EmulatorOptions{
			Name: id, RIE: rie, Bootstrap: s.Bootstraps[id], Env: env,
			Timeout: fn.Timeout, MemoryMB: fn.MemorySize, LogPath: filepath.Join(o.Dir, id+".log"),
		})
		if err != nil {
			return nil, err
		}
		s.Functions[id] = em
		s.Invoke.Register(id, em.Invoke)
		name := FunctionName(id, res[id])
		if name != id {
			s.Invoke.Register(name, em.Invoke)
		}
		if s.Names == nil {
			s.Names = map[string]string{}
		}
		s.Names[id] = name
		for _, r := range fn.Routes {
			routes = append(routes, Route{Method: r.Method, Path: r.Path, Function: em})
		}
		if fn.URL != nil {
			if s.URLs[id], err = NewFunctionURL(em, *fn.URL, o.URLTargets[id], o.IAM, log); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range rules {
		if err := s.Events.AddRule(r); err != nil {
			return nil, err
		}
	}

	// The custom resources, as CloudFormation creates them before the
	// functions that depend on them serve.
	for i := range s.customs {
		c := &s.customs[i]
		if c.id == SchemaResourceID {
			s.schemaPasswordAuth(c.props)
		}
		answer, resp, err := s.send(ctx, c, cfn.RequestCreate, nil)
		if err != nil {
			return nil, err
		}
		if resp["Status"] != "SUCCESS" {
			return nil, fmt.Errorf("lambdalocal: %s's Create was answered %s\n%s", c.id, answer.Body, tail(s.Functions[c.function].LogPath()))
		}
		c.physical, _ = resp["PhysicalResourceId"].(string)
		s.Created[c.id] = answer
	}
	s.Schema = s.Created[SchemaResourceID]
	s.Front = NewFront(routes, log)
	if o.FireEvery > 0 {
		var runCtx context.Context
		runCtx, s.stop = context.WithCancel(context.Background())
		s.wg.Go(func() { s.Scheduler.Run(runCtx, o.FireEvery) })
	}
	ok = true
	return s, nil
}

// startServices starts the local AWS services: the Lambda Invoke API, the
// Scheduler (firing into it), Secrets Manager, the event bus (invoking
// through it), and the S3 server, which notifies the bus, with the
// template's buckets.
func (s *Stack) startServices(ctx context.Context, o StackOptions, log *slog.Logger) error {
	var err error
	if s.Invoke, err = localinvoke.Start(localinvoke.Options{}); err != nil {
		return err
	}
	// EventBridge Scheduler invokes a Lambda target asynchronously, with
	// the schedule's Input as the event:
	// https://docs.aws.amazon.com/lambda/latest/dg/with-eventbridge-scheduler.html
	if s.Scheduler, err = localscheduler.Start(localscheduler.Options{Now: o.SchedulerNow, Fire: func(_ context.Context, sc localscheduler.Schedule) error {
		return s.Invoke.InvokeEvent(sc.Target.Arn, []byte(sc.Target.Input), "scheduler:"+sc.GroupName+"/"+sc.Name)
	}}); err != nil {
		return err
	}
	if s.Secrets, err = localsecrets.Start(); err != nil {
		return err
	}
	if s.Events, err = localevents.Start(localevents.Options{Buckets: s.dep.notify, Account: Account, Region: Region, Logger: log,
		Invoke: func(target string, event []byte, rule string) error {
			return s.Invoke.InvokeEvent(target, event, "events:"+rule)
		}}); err != nil {
		return err
	}
	so := o.S3
	so.EventWebhookURL, so.Versioning = s.Events.NotificationURL(), true
	if s.S3, err = locals3.Start(ctx, so); err != nil {
		return err
	}
	for id, name := range s.dep.buckets {
		cfg := s.S3.BlobConfig(name)
		if err := locals3.CreateBucket(ctx, cfg, slices.Contains(s.dep.versions, name)); err != nil {
			return fmt.Errorf("lambdalocal: bucket %s: %w", id, err)
		}
		s.Buckets[id] = cfg
	}
	return nil
}

// roleSecrets puts each role's secret, with a fresh random password, where
// the schema resource's properties name it (in the profiles that make
// them) or at SecretARN, and returns the passwords.
func (s *Stack) roleSecrets() map[string]string {
	props := map[string]any{}
	for _, c := range s.customs {
		if c.id == SchemaResourceID {
			props = c.props
		}
	}
	passwords := map[string]string{}
	for prop, role := range secretProps {
		passwords[role] = randomID() // as GenerateSecretString would
		doc, _ := json.Marshal(map[string]string{"username": role, "password": passwords[role]})
		arn, _ := props[prop].(string)
		if arn == "" {
			arn = SecretARN(role)
		}
		s.Secrets.Put(arn, string(doc))
	}
	return passwords
}

// secretProps maps the schema resource's secret properties to their roles.
var secretProps = map[string]string{
	migrator.PropReceiverSecretArn: migrate.RoleReceiver, migrator.PropProcessorSecretArn: migrate.RoleProcessor,
	migrator.PropArchiverSecretArn: migrate.RoleArchiver, migrator.PropOperatorReadSecretArn: migrate.RoleOperatorRead,
	migrator.PropOperatorSecretArn: migrate.RoleOperator,
}

// schemaPasswordAuth makes the schema resource set the roles' passwords
// from their local secrets: the local database checks passwords, and
// knows nothing of RDS IAM tokens.
func (s *Stack) schemaPasswordAuth(props map[string]any) {
	if props[migrator.PropAuth] == string(migrate.AuthPassword) {
		return
	}
	props[migrator.PropAuth] = string(migrate.AuthPassword)
	for prop, role := range secretProps {
		props[prop] = SecretARN(role)
	}
}

// environment is function id's environment: the template's, with the
// local stand-ins' values, then the local services' settings, then
// o.Env's, then (for a serving function) its database. A variable whose
// value only a deployed stack knows, and that nothing here sets, is an
// error: the local stack lacks a stand-in for what it names.
func (s *Stack) environment(o StackOptions, id string, r samtemplate.Resource, admin *url.URL) ([]string, error) {
	tmpl, missing, err := s.dep.environment(r)
	if err != nil {
		return nil, fmt.Errorf("lambdalocal: %s's environment: %w", id, err)
	}
	sslmode := admin.Query().Get("sslmode")
	if sslmode == "" {
		sslmode = "disable"
	}
	s3 := s.S3.BlobConfig("")
	overrides := []string{
		// Every AWS call stays on this machine, signed with local keys;
		// no developer's AWS configuration is read.
		"AWS_ENDPOINT_URL_LAMBDA=" + s.Invoke.Endpoint(),
		"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + s.Secrets.Endpoint(),
		"AWS_ENDPOINT_URL_SCHEDULER=" + s.Scheduler.Endpoint(),
		"AWS_ACCESS_KEY_ID=" + localAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + localSecretAccessKey,
		"AWS_CONFIG_FILE=" + filepath.Join(o.Dir, "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(o.Dir, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=" + s3.Region,
		// Every bucket is on the local S3 server (blobstore's S3_*).
		"S3_ENDPOINT=" + s3.Endpoint, "S3_ACCESS_KEY_ID=" + s3.AccessKeyID, "S3_SECRET_ACCESS_KEY=" + s3.SecretAccessKey,
		// The local database, whatever the template's mode says of where
		// it is (a parameter in existing mode): no TLS.
		"DATABASE_HOST=" + admin.Hostname(), "DATABASE_PORT=" + cmp.Or(admin.Port(), "5432"),
		"DATABASE_NAME=" + strings.TrimPrefix(admin.Path, "/"), "DATABASE_SSLMODE=" + sslmode,
		// The migration function: the local database checks passwords
		// (schemaPasswordAuth), and CloudFormation's S3 response URL is
		// the loopback stand-in InvokeCustomResource serves, which only
		// this setting lets it answer (the template never sets it).
		migrator.EnvRolesAuth + "=" + string(migrate.AuthPassword), migrator.EnvLocalResponseURL + "=true",
		// The relay's custom resource answers the same stand-in.
		relay.EnvLocalResponseURL + "=true",
	}
	overrides = append(append(overrides, o.Env["*"]...), o.Env[id]...)
	if u, serving := s.RoleURLs[id]; serving {
		overrides = append(overrides, databaseEnv(u)...)
	}
	env := localEnv(tmpl, overrides)
	set := map[string]bool{}
	for _, kv := range overrides {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var errs []error
	keys := slices.Sorted(maps.Keys(missing))
	for _, k := range keys {
		if !set[k] {
			errs = append(errs, fmt.Errorf("lambdalocal: %s's %s names %s, which the local stack does not stand in for", id, k, strings.Join(missing[k], ", ")))
		}
	}
	return env, errors.Join(errs...)
}

// checkURLs refuses, before anything is built, a function URL the local
// stack cannot serve as Lambda would, and a target named for a function
// that has none.
func checkURLs(o StackOptions) error {
	var errs []error
	for _, id := range o.Template.FunctionIDs() {
		u := o.Template.Functions[id].URL
		switch {
		case u == nil:
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

// databaseEnv points a function at dbURL, blanking what the template may
// say of its database in AWS (its host, IAM, a secret), which would
// otherwise fill in or replace parts of the URL.
func databaseEnv(dbURL string) []string {
	return []string{"DATABASE_URL=" + dbURL, "DATABASE_HOST=", "DATABASE_PORT=", "DATABASE_NAME=", "DATABASE_USER=", "DATABASE_IAM_AUTH=",
		"DATABASE_SECRET_ARN="}
}

// localEnv is the template's environment, then the overrides.
func localEnv(tmpl map[string]string, overrides []string) []string {
	keys := slices.Sorted(maps.Keys(tmpl))
	// Drop the keys being overridden rather than relying on which of two
	// duplicate entries a program's getenv returns.
	over := map[string]bool{}
	for _, kv := range overrides {
		k, _, _ := strings.Cut(kv, "=")
		over[k] = true
	}
	var env []string
	for _, k := range keys {
		if !over[k] {
			env = append(env, k+"="+tmpl[k])
		}
	}
	return append(env, overrides...)
}

// send sends custom resource c's request of type typ, as CloudFormation
// does, and returns the answer its function PUT and the answer decoded.
func (s *Stack) send(ctx context.Context, c *customResource, typ cfn.RequestType, old map[string]any) (Answer, map[string]any, error) {
	em, ok := s.Functions[c.function]
	if !ok {
		return Answer{}, nil, fmt.Errorf("lambdalocal: %s's function %s is not running", c.id, c.function)
	}
	req := cfn.Event{RequestType: typ, ResourceType: c.typ, LogicalResourceID: c.id, StackID: s.stackID,
		ResourceProperties: c.props, OldResourceProperties: old, PhysicalResourceID: c.physical}
	answer, _, err := InvokeCustomResource(ctx, em, req)
	if err != nil {
		return answer, nil, fmt.Errorf("lambdalocal: %s's %s: %w\n%s", c.id, typ, err, tail(em.LogPath()))
	}
	resp, err := answer.Response()
	if err != nil {
		return answer, nil, fmt.Errorf("lambdalocal: %s's %s was answered %q: %w", c.id, typ, answer.Body, err)
	}
	return answer, resp, nil
}

// Update sends custom resource id an Update, as a deploy that changes it
// does (for DatabaseSchema, each deploy of new code: its Release
// changes), and returns the answer.
func (s *Stack) Update(ctx context.Context, id string) (Answer, error) {
	for i := range s.customs {
		if c := &s.customs[i]; c.id == id {
			old := maps.Clone(c.props)
			c.props = maps.Clone(c.props)
			c.props["Release"] = fmt.Sprintf("local-%d", time.Now().UnixNano())
			answer, _, err := s.send(ctx, c, cfn.RequestUpdate, old)
			return answer, err
		}
	}
	return Answer{}, fmt.Errorf("lambdalocal: no custom resource %s", id)
}

// Teardown deletes the stack as `sam delete` would in the worst order a
// create-mode teardown (or a rollback) can take: every function but the
// custom resources' own is gone first (the migration function, its VPC
// network with it), then Secrets Manager too; then each custom resource
// is sent Delete and must answer at once, without them. It returns each
// resource's answer to Delete. The stack is closed afterwards.
func (s *Stack) Teardown(ctx context.Context) (map[string]Answer, error) {
	keep := map[string]bool{}
	for _, c := range s.customs {
		keep[c.function] = true
	}
	var wg sync.WaitGroup
	for id, em := range s.Functions {
		if !keep[id] {
			s.Invoke.Unregister(id)
			wg.Go(func() { _ = em.Close() })
			delete(s.Functions, id)
		}
	}
	wg.Wait()
	_ = s.Secrets.Close()
	answers := map[string]Answer{}
	var errs []error
	for i := len(s.customs) - 1; i >= 0; i-- {
		c := &s.customs[i]
		answer, resp, err := s.send(ctx, c, cfn.RequestDelete, nil)
		answers[c.id] = answer
		switch {
		case err != nil:
			errs = append(errs, err)
		case resp["Status"] != "SUCCESS":
			errs = append(errs, fmt.Errorf("lambdalocal: %s's Delete was answered %s", c.id, answer.Body))
		}
	}
	return answers, errors.Join(errs...)
}

// RotateSources makes doc the current version of the sources secret, as
// a rotation (or PutSecretValue) does, and puts on the local bus the
// Secret Label Updated event Secrets Manager sends EventBridge for it,
// which the template's rule hands to the relay, which copies it to the
// control bucket. Functions that read the copy at init (the receiver)
// see it in their next execution environment, here their next start.
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/event-detail-secret-label-updated-secretsmanager.html
func (s *Stack) RotateSources(doc []byte) ([]localevents.Delivery, error) {
	arn, _ := s.tpl.Stack.Param("SourcesSecretArn").(string)
	version := s.Secrets.Put(arn, string(doc))
	name := arn[strings.LastIndex(arn, ":")+1:]
	// A full ARN's name ends with the six characters Secrets Manager adds.
	if i := strings.LastIndex(name, "-"); i > 0 && len(name)-i == 7 {
		name = name[:i]
	}
	ev, _ := json.Marshal(map[string]any{
		"version": "0", "id": uuid.NewString(), "detail-type": "Secret Label Updated", "source": "aws.secretsmanager",
		"account": Account, "time": time.Now().UTC().Format(time.RFC3339), "region": Region, "resources": []string{arn},
		"detail": map[string]string{"name": name, "labelUpdated": "AWSCURRENT", "versionId": version},
	})
	return s.Events.Put(ev)
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

// Getenv returns function id's variable k as the function was started
// with it ("" when unset).
func (s *Stack) Getenv(id, k string) string {
	for _, kv := range slices.Backward(s.env[id]) {
		if key, v, _ := strings.Cut(kv, "="); key == k {
			return v
		}
	}
	return ""
}

// FunctionIDs returns the running functions' logical ids, sorted.
func (s *Stack) FunctionIDs() []string {
	ids := slices.Collect(maps.Keys(s.Functions))
	sort.Strings(ids)
	return ids
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

// Close stops the scheduler's firing, the queued invocations, every
// emulator and the local services.
func (s *Stack) Close() {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	if s.Invoke != nil {
		_ = s.Invoke.Close()
	}
	var wg sync.WaitGroup
	for _, em := range s.Functions {
		wg.Go(func() { _ = em.Close() })
	}
	wg.Wait()
	if s.Events != nil {
		_ = s.Events.Close()
	}
	if s.S3 != nil {
		_ = s.S3.Close()
	}
	if s.Scheduler != nil {
		_ = s.Scheduler.Close()
	}
	if s.Secrets != nil {
		_ = s.Secrets.Close()
	}
}
