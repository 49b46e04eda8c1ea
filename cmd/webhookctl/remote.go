package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The remote backend: every operator command through a stack's operator
// function (its IAM-authenticated function URLs), with the operator's own
// AWS credentials, instead of a network path to the database.
const (
	// EnvStack names the stack when --stack does not.
	EnvStack = "WEBHOOK_INBOX_STACK"
	// EnvOperatorURL and EnvOperatorReadURL name an operator API directly
	// (the acting function's URL, and the read-only one's), for a stack
	// whose outputs you may not read, or make dev's.
	EnvOperatorURL     = "WEBHOOKCTL_OPERATOR_URL"
	EnvOperatorReadURL = "WEBHOOKCTL_OPERATOR_READ_URL"
)

// registerRemote adds the flags that choose the remote backend to every
// command.
func registerRemote(root *cobra.Command) {
	f := root.PersistentFlags()
	f.String("stack", "", "reach this deployed stack through its operator function, with your AWS credentials (default $"+EnvStack+")")
	f.String("operator-url", "", "reach the operator API at this URL (the stack's OperatorUrl; default $"+EnvOperatorURL+")")
	f.String("operator-read-url", "", "its read-only URL (the stack's OperatorReadUrl; default $"+EnvOperatorReadURL+", else --operator-url)")
	f.Bool("via-api", false, "reach the running make dev through its operator API (and its stand-in for IAM), as a deployed stack is reached")
}

// remote is where the remote backend is, and how to sign for it.
type remote struct {
	// what says where the URLs came from, for messages.
	what            string
	readURL, actURL string
	creds           aws.CredentialsProvider
	region          string
}

// flagOrEnv is a persistent flag's value, else the variable's.
func flagOrEnv(cmd *cobra.Command, flag, env string) string {
	if f := cmd.Flags().Lookup(flag); f != nil && f.Value.String() != "" {
		return strings.TrimSpace(f.Value.String())
	}
	if env == "" {
		return ""
	}
	return strings.TrimSpace(envOf(cmd)(env))
}

// remoteAsked reports whether the command is to go through an operator
// API.
func remoteAsked(cmd *cobra.Command) bool {
	return flagOrEnv(cmd, "stack", EnvStack) != "" || flagOrEnv(cmd, "operator-url", EnvOperatorURL) != "" ||
		flagOrEnv(cmd, "via-api", "") == "true"
}

// findRemote resolves the remote backend the flags ask for: a stack's
// outputs (CloudFormation DescribeStacks, with the operator's AWS
// configuration), URLs given, or make dev's operator API. ok is false
// when none is asked.
func findRemote(cmd *cobra.Command) (remote, bool, error) {
	ctx, getenv := cmd.Context(), envOf(cmd)
	stack, url := flagOrEnv(cmd, "stack", EnvStack), flagOrEnv(cmd, "operator-url", EnvOperatorURL)
	viaAPI := flagOrEnv(cmd, "via-api", "") == "true"
	switch n := btoi(stack != "") + btoi(url != "") + btoi(viaAPI); {
	case n == 0:
		return remote{}, false, nil
	case n > 1:
		return remote{}, false, errors.New("give one of --stack, --operator-url and --via-api")
	}
	if viaAPI {
		return devRemote(cmd)
	}
	cfg, err := operatorclient.LoadConfig(ctx, getenv)
	if err != nil {
		return remote{}, false, err
	}
	r := remote{what: url, actURL: url, readURL: flagOrEnv(cmd, "operator-read-url", EnvOperatorReadURL), creds: cfg.Credentials, region: cfg.Region}
	if stack != "" {
		t, err := operatorclient.Stack(ctx, cfg, stack)
		if err != nil {
			return remote{}, false, err
		}
		r.what, r.actURL, r.readURL = "stack "+stack, t.ActURL, t.ReadURL
		if t.Region != "" {
			r.region = t.Region
		}
	}
	return r, true, nil
}

// devRemote is make dev's operator API, from its stack file, signed as
// its local operator identity.
func devRemote(cmd *cobra.Command) (remote, bool, error) {
	dir, _ := cmd.Context().Value(stackDirKey{}).(string)
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return remote{}, false, err
		}
	}
	st, path, ok, err := checkout.FindStack(dir)
	switch {
	case err != nil:
		return remote{}, false, err
	case !ok:
		return remote{}, false, fmt.Errorf("--via-api: no make dev is running in this checkout (%s)", checkout.StackFile)
	case st.Operator == nil || st.Operator.Identities["operator"].AccessKeyID == "":
		return remote{}, false, fmt.Errorf("--via-api: the make dev of %s serves no operator API: restart it", path)
	}
	id := st.Operator.Identities["operator"]
	return remote{
		what: "make dev's operator API", actURL: st.Operator.URL, readURL: st.Operator.ReadURL, region: st.Operator.Region,
		creds: credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken),
	}, true, nil
}

// openRemote is the operator API's client for r; readOnly keeps it on the
// read-only URL, so that nothing it sends can act.
func openRemote(r remote, readOnly bool) (operations.API, error) {
	tr, err := operatorclient.NewTransport(r.creds, r.region, nil)
	if err != nil {
		return nil, err
	}
	act := r.actURL
	if readOnly {
		act = ""
		if r.readURL == "" {
			return nil, fmt.Errorf("%s: a read-only console needs the read-only URL (--operator-read-url, the stack's OperatorReadUrl)", r.what)
		}
	}
	c, err := operatorclient.New(operatorclient.Config{ReadURL: r.readURL, ActURL: act, HTTP: &http.Client{Transport: tr, Timeout: operatorclient.DefaultTimeout}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.what, err)
	}
	return c, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
