// Package samlocal points `sam local` (the AWS SAM CLI, which runs each
// function in a Docker container) at a running make dev: the env.json of
// the functions' variables for its database and S3 server, as a container
// reaches them (host.docker.internal), and the relays that make the dev
// stack's loopback-only servers reachable from Docker's bridge on Linux.
//
// make dev's PostgreSQL and S3 listen on 127.0.0.1 only, on ports picked
// at random, and trust whoever connects from there. A container reaches
// the host at host.docker.internal: Docker Desktop forwards that to the
// host's loopback, and on Linux `--add-host host.docker.internal:host-gateway`
// makes it the bridge's gateway address, where nothing listens. So on Linux
// a relay listens on the bridge's address, on the same port, and forwards
// to the loopback: the servers are reachable from local containers and
// still not from the network.
package samlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// HostName is how a container names the machine it runs on.
const HostName = "host.docker.internal"

// EnvFile is where make dev writes env.json, relative to the repository
// root (`sam local ... --env-vars .local/env.json`).
var EnvFile = filepath.Join(".local", "env.json")

// Stack is what sam local needs of a running dev stack.
type Stack struct {
	// DatabaseURL is the dev stack's database (make dev's DATABASE_URL).
	DatabaseURL string
	// Logins are, by function (its logical ID), the login its
	// DATABASE_URL carries instead of DatabaseURL's: its deployed role's,
	// as make dev connects each component. A function without one gets
	// DatabaseURL's (make dev --as-owner).
	Logins map[string]*url.Userinfo
	// S3Endpoint, S3AccessKeyID, S3SecretAccessKey, Bucket and MinAge are
	// the archiver's S3 settings.
	S3Endpoint, S3AccessKeyID, S3SecretAccessKey, Bucket, MinAge string
	// Sources is the sources document (JSON) the receiver verifies with:
	// a container cannot read the host's files, so it is passed inline.
	Sources string
}

// Env returns the env.json document for the template's functions: for the
// receiver, the processor, the archiver and the operator functions, the
// variables that point them at st from inside a container (loopback hosts
// become HostName), and that turn off what only works in AWS (secrets, IAM
// auth, the relay's copy of the sources in the control bucket, the
// wake-ups), with the processor draining once per invocation. sam local
// only overrides variables the template declares for a function, so only
// those are set; a function the template lacks is left out, and so are
// the relay and the migration front, which only answer AWS's events.
//
// Nothing is woken under sam local (WAKE_MODE=none, no control bucket):
// the receiver would invoke the processor through the Lambda API, which a
// container reaches only at an endpoint the template does not let
// env.json set (AWS_ENDPOINT_URL_LAMBDA is not among its variables); in
// economy it would write a marker that no EventBridge reads. `sam local
// invoke ProcessorFunction` drains what the receiver stored; `make local`
// runs the whole wake-up path.
func Env(tpl *samtemplate.Template, st Stack) (map[string]map[string]string, error) {
	dbURL, err := containerURL(st.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	u, _ := url.Parse(dbURL)
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	database := map[string]string{
		"DATABASE_URL":        dbURL,
		"DATABASE_SECRET_ARN": "",
		"DATABASE_IAM_AUTH":   "false",
		"DATABASE_USER":       "",
		// Whatever reads DATABASE_HOST/PORT/NAME next to the URL finds the
		// same database.
		"DATABASE_HOST":    u.Hostname(),
		"DATABASE_PORT":    port,
		"DATABASE_NAME":    strings.TrimPrefix(u.Path, "/"),
		"DATABASE_SSLMODE": sslMode(u),
	}
	s3, err := containerURL(st.S3Endpoint)
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint: %w", err)
	}
	archive := map[string]string{
		"ARCHIVE_BUCKET":       st.Bucket,
		"ARCHIVE_MIN_AGE":      st.MinAge,
		"S3_ENDPOINT":          s3,
		"S3_ACCESS_KEY_ID":     st.S3AccessKeyID,
		"S3_SECRET_ACCESS_KEY": st.S3SecretAccessKey,
	}
	// No wake-up and no arming (see above): WAKE_BUCKET, empty, turns off
	// the markers every function writes.
	noWake := map[string]string{"WAKE_MODE": "none", "WAKE_FUNCTION": "", "WAKE_BUCKET": ""}
	perFunction := map[string]map[string]string{
		"ReceiverFunction": {
			// The document itself, not the relay's copy in S3 (nor the
			// secret an older template names).
			"WEBHOOK_SOURCES":            st.Sources,
			"WEBHOOK_SOURCES_OBJECT":     "",
			"WEBHOOK_SOURCES_SECRET_ARN": "",
		},
		// One drain per `sam local invoke`, without the second a deployed
		// invocation lingers (PROCESSOR_RUN_FOR) for the receivers'
		// debounced wake-ups, which do not come here.
		"ProcessorFunction": {"PROCESSOR_RUN_FOR": "0"},
		"ArchiverFunction":  archive,
		// The operator functions read archived bodies, and the acting one
		// archives and expunges, in the same archive as the archiver.
		"OperatorReadFunction": archive,
		"OperatorFunction":     archive,
	}
	out := map[string]map[string]string{}
	for id, own := range perFunction {
		fn, ok := tpl.Functions[id]
		if !ok {
			continue
		}
		vars := map[string]string{}
		database := database
		if login := st.Logins[id]; login != nil {
			u, _ := url.Parse(dbURL)
			u.User = login
			database = maps.Clone(database)
			database["DATABASE_URL"] = u.String()
		}
		for _, set := range []map[string]string{database, noWake, own} {
			for k, v := range set {
				if _, declared := fn.Environment[k]; declared {
					vars[k] = v
				}
			}
		}
		out[id] = vars
	}
	return out, nil
}

// containerURL is u as a container reaches it: a loopback host becomes
// HostName; any other host is kept.
func containerURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", errors.New("not a URL with a host") // the URL may hold a password: not echoed
	}
	if isLoopback(u.Hostname()) {
		if p := u.Port(); p != "" {
			u.Host = net.JoinHostPort(HostName, p)
		} else {
			u.Host = HostName
		}
	}
	return u.String(), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sslMode(u *url.URL) string {
	if m := u.Query().Get("sslmode"); m != "" {
		return m
	}
	return "disable"
}

// LoopbackPorts returns the ports of the loopback URLs among urls: those
// the relays must forward.
func LoopbackPorts(urls ...string) []string {
	var ports []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || !isLoopback(u.Hostname()) || u.Port() == "" {
			continue
		}
		ports = append(ports, u.Port())
	}
	sort.Strings(ports)
	return ports
}

// WriteEnv writes doc to path as env.json, readable by its owner only (it
// holds the dev stack's database URL and the sources' secrets, fake as
// they are), replacing it whole.
func WriteEnv(path string, doc map[string]map[string]string) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
