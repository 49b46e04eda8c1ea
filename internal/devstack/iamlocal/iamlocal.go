// Package iamlocal stands in for what AWS Lambda does in front of a
// function URL whose AuthType is AWS_IAM: it checks the request's
// Signature Version 4 (service lambda) against a set of local identities,
// checks that the identity may invoke that function URL, and hands the
// caller's principal on as Lambda puts it in the event
// (requestContext.authorizer.iam); every refusal is Lambda's own answer,
// 403 {"Message":"Forbidden"}.
//
// There is no AWS on a developer's machine nor in the tests, and an
// operator API that trusts an unverified principal locally would be tested
// on a path that never runs in AWS. So the check here is the real one:
// the canonical request computed from the request as received, the
// signing key derived from the identity's secret, the signature compared
// in constant time, the clock skew bounded, the body's hash checked.
//
// It is only ever used in development and tests (make dev, the emulator's
// function URL front in internal/devstack/lambdalocal, tests): no Lambda
// and not webhookctl link it; the identities it knows are made up on this
// machine and mean nothing to AWS.
package iamlocal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
)

// Account is the account of the identities NewIdentity makes, and of the
// local function URLs: an account number AWS never hands out.
const Account = "000000000000"

// Role is the role the identities NewIdentity makes have assumed, as an
// operator's SSO or assumed-role session would.
const Role = "WebhookInboxOperator"

// Identity is one local principal: its credentials, who it is (what
// Lambda reports to the function), and the targets (function URLs, by a
// name such as "read" or "act") its policy lets it invoke, as the stack's
// managed policies grant lambda:InvokeFunctionUrl on one or both.
type Identity struct {
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken is set for temporary credentials; a request signed
	// with them must carry exactly it in X-Amz-Security-Token, and a
	// request signed with long-term credentials must carry none.
	SessionToken string
	AccountID    string
	UserARN      string
	UserID       string
	Targets      []string
}

// sessionName is what IAM accepts as a role session name.
var sessionName = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

// NewIdentity makes temporary credentials, fresh and random, for the
// person or tool called name, as if they had assumed Role in Account:
// what `make dev` prints for an operator to export. The identity may
// invoke the targets given.
func NewIdentity(name string, targets ...string) (Identity, error) {
	if !sessionName.MatchString(name) {
		return Identity{}, fmt.Errorf("iamlocal: identity name %q: want 2 to 64 of letters, digits and +=,.@_-, as a role session name", name)
	}
	if len(targets) == 0 {
		return Identity{}, fmt.Errorf("iamlocal: identity %s may invoke nothing: name its targets", name)
	}
	// ASIA is the prefix of temporary access key ids, AROA of role ids.
	id := Identity{
		AccessKeyID:     "ASIA" + randomUpper(16),
		SecretAccessKey: randomToken(30),
		SessionToken:    randomToken(48),
		AccountID:       Account,
		UserARN:         "arn:aws:sts::" + Account + ":assumed-role/" + Role + "/" + name,
		UserID:          "AROA" + randomUpper(17) + ":" + name,
		Targets:         slices.Clone(targets),
	}
	return id, nil
}

// May reports whether the identity may invoke target.
func (id Identity) May(target string) bool { return slices.Contains(id.Targets, target) }

// Credentials are the identity's credentials, as an AWS SDK holds them.
func (id Identity) Credentials() aws.Credentials {
	return aws.Credentials{AccessKeyID: id.AccessKeyID, SecretAccessKey: id.SecretAccessKey, SessionToken: id.SessionToken, Source: "iamlocal"}
}

// Env is the identity's credentials as the AWS SDKs and CLI read them from
// the environment ("K=V"), to print or to give a command.
func (id Identity) Env() []string {
	env := []string{"AWS_ACCESS_KEY_ID=" + id.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + id.SecretAccessKey}
	if id.SessionToken != "" {
		env = append(env, "AWS_SESSION_TOKEN="+id.SessionToken)
	}
	return env
}

// IAM is the caller's description Lambda puts in the event of a function
// URL with AuthType AWS_IAM. For a role session, the caller id is the
// user id (role id and session name).
func (id Identity) IAM() *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: id.AccessKeyID,
		AccountID: id.AccountID,
		CallerID:  id.UserID,
		UserARN:   id.UserARN,
		UserID:    id.UserID,
	}
}

func (id Identity) validate() error {
	var missing []string
	for name, v := range map[string]string{"access key id": id.AccessKeyID, "secret access key": id.SecretAccessKey,
		"account id": id.AccountID, "user ARN": id.UserARN, "user id": id.UserID} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("iamlocal: identity %q has no %s", id.UserARN, strings.Join(missing, ", "))
	}
	// The access key id is the first field of the credential scope, which
	// is split on "/".
	if strings.ContainsAny(id.AccessKeyID, "/ ,=") {
		return fmt.Errorf("iamlocal: access key id %q holds a separator", id.AccessKeyID)
	}
	return nil
}

var errNoIdentities = errors.New("iamlocal: a verifier needs at least one identity")

const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

func randomUpper(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = upper[int(b[i])%len(upper)]
	}
	return string(b)
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
