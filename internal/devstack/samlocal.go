package devstack

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// SamLocalPort is the port the README's `sam local start-api` uses: make
// dev has 3000.
const SamLocalPort = 3001

// samLocal points `sam local` at this stack: it writes env.json (the
// functions' variables for this stack's database and S3 as a container
// reaches them) to path and, where Docker's bridge exists (Linux), relays
// the local servers' loopback ports to it. sam local is optional: any
// problem is said and skipped, never fatal. stop removes the file and the
// relays.
func samLocal(out io.Writer, root, path string, cfgs Configs, resolved func(string) string, passwords map[string]string) (stop func()) {
	stop = func() {}
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{
		"SourcesSecretArn": "arn:aws:secretsmanager:us-east-1:000000000000:secret:local",
	})
	if err != nil {
		fmt.Fprintf(out, "sam local: no env.json (%v)\n", err)
		return stop
	}
	sources := resolved(source.EnvSources)
	if cfgs.SourcesFrom != source.EnvSources {
		b, err := os.ReadFile(cfgs.SourcesFrom)
		if err != nil {
			fmt.Fprintf(out, "sam local: no env.json (%v)\n", err)
			return stop
		}
		sources = string(b)
	}
	s3 := cfgs.S3
	st := samlocal.Stack{
		DatabaseURL: cfgs.Database.URL,
		S3Endpoint:  s3.Endpoint, S3AccessKeyID: s3.AccessKeyID, S3SecretAccessKey: s3.SecretAccessKey,
		Bucket: s3.Bucket, MinAge: cfgs.Archive.MinAge.String(), Sources: sources,
	}
	if passwords != nil {
		// Each function's container connects as its deployed role, as
		// make dev's components do.
		st.Logins = map[string]*url.Userinfo{}
		for id, role := range lambdalocal.FunctionRoles {
			st.Logins[id] = url.UserPassword(role, passwords[role])
		}
	}
	env, err := samlocal.Env(tpl, st)
	if err == nil {
		err = samlocal.WriteEnv(path, env)
	}
	if err != nil {
		fmt.Fprintf(out, "sam local: no env.json (%v)\n", err)
		return stop
	}
	var relay *samlocal.Relay
	reach := "Docker Desktop reaches them as they are"
	ports := samlocal.LoopbackPorts(st.DatabaseURL, st.S3Endpoint)
	if bridge, ok := samlocal.BridgeAddr(); ok && len(ports) > 0 {
		relay, err = samlocal.StartRelay(bridge, ports)
		if err != nil {
			reach = fmt.Sprintf("not reachable from containers: %v", err)
		} else {
			reach = "relayed from Docker's bridge " + bridge
		}
	} else if !ok {
		reach = "no Docker bridge (" + samlocal.BridgeInterface + ") here: on Linux start Docker before make dev; " + reach
	}
	shown := path
	if rel, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(rel) {
		shown = rel
	}
	region := s3.Region
	if region == "" {
		region = "us-east-1"
	}
	fmt.Fprintf(out, "sam local: %s points the functions' containers at this stack's ports %v (%s); in another terminal:\n", shown, ports, reach)
	fmt.Fprintf(out, "  sam build && sam local start-api --port %d --env-vars %s --add-host %s:host-gateway --region %s\n", SamLocalPort, shown, samlocal.HostName, region)
	return func() {
		if relay != nil {
			relay.Close()
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			fmt.Fprintln(out, "removing env.json:", err)
		}
	}
}
