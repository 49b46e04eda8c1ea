// Package lambdahttp serves a plain net/http Handler behind API Gateway HTTP
// APIs (payload format 2.0), so the receiver's logic is one http.Handler
// whether it runs in Lambda, in `make dev` or in tests.
//
// We wrote this small adapter instead of depending on
// awslabs/aws-lambda-go-api-proxy because that module's go.mod pulls gin,
// echo, fiber, iris and roughly eighty other modules into our go.sum for what
// amounts to about 150 lines of conversion.
//
// The conversion follows what the net/http server itself does with a request
// off the wire (ParseRequestURI path semantics, Host promoted out of the
// header map, Content-Type sniffing, header snapshot at WriteHeader), so a
// handler cannot tell the two apart and behaves the same in every setting.
// Responses are buffered in full because a payload 2.0 response is a single
// JSON document; that also lets a handler panic be answered cleanly even
// after the handler has started writing.
//
// The adapter has no answers of its own: what it refuses (an event that is
// not a request) and what panics go to the application's ErrorWriter, the
// receiver's, so every answer, log line and metric follows the receiver's
// one status table (a panic is cause internal: 503 with Retry-After).
// make dev serves the receiver through Handler too, fed the events API
// Gateway would send, so a panic is answered there as in Lambda.
package lambdahttp
