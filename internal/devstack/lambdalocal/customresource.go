package lambdalocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
)

// Answer is what a custom resource's function PUT to the request's
// ResponseURL, as received.
type Answer struct {
	Method string
	// ContentType holds the Content-Type header's values: [""] when the
	// header is sent empty, as the pre-signed URL wants, nil when absent.
	ContentType   []string
	ContentLength int64
	Body          []byte
	// Took is how long after the invocation began the answer arrived.
	Took time.Duration
}

// Response decodes the answer's body.
func (a Answer) Response() (map[string]any, error) {
	var m map[string]any
	err := json.Unmarshal(a.Body, &m)
	return m, err
}

// InvokeCustomResource sends fn a CloudFormation custom-resource request,
// as CloudFormation does, with a ResponseURL of its own: a loopback server
// standing in for the pre-signed S3 URL, shaped like one. It returns the
// answer the function PUT there, and the invocation's own result (which
// CloudFormation never reads). An invocation that ends without an answer
// is an error: CloudFormation would wait for one until the resource's
// ServiceTimeout.
func InvokeCustomResource(ctx context.Context, fn *Emulator, req cfn.Event) (Answer, []byte, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Answer{}, nil, err
	}
	var mu sync.Mutex
	var answers []Answer
	start := time.Now()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		answers = append(answers, Answer{Method: r.Method, ContentType: r.Header.Values("Content-Type"), ContentLength: r.ContentLength, Body: body,
			Took: time.Since(start)})
		mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	if req.RequestID == "" {
		req.RequestID = randomID()
	}
	req.ResponseURL = fmt.Sprintf("http://%s/cloudformation-custom-resource-response-local/%s?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=7200&X-Amz-Signature=local",
		ln.Addr(), req.RequestID)
	payload, err := json.Marshal(req)
	if err != nil {
		return Answer{}, nil, err
	}
	out, invokeErr := fn.Invoke(ctx, payload)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case len(answers) == 0 && invokeErr != nil:
		return Answer{}, out, fmt.Errorf("%s answered nothing: %w", fn.Name, invokeErr)
	case len(answers) == 0:
		return Answer{}, out, fmt.Errorf("%s answered nothing (invocation result %s)", fn.Name, out)
	case len(answers) > 1:
		return answers[len(answers)-1], out, errors.Join(fmt.Errorf("%s answered %d times", fn.Name, len(answers)), invokeErr)
	}
	return answers[0], out, invokeErr
}
