// Package layout keeps the repository's shape: its tests read the
// dependency graph with `go list -deps` and fail when a package links what
// its place says it must not. No Lambda binary links the development and
// test tooling under internal/; the receiver links neither the processor,
// the S3 SDK nor the migrations; only the migration function links the
// migrations; the relay, outside the VPC, links no database; settings
// stays a leaf; the operator's webhookctl links none of the dev stack's
// servers and emulators. It also reads the module's and the bench's types
// (go/packages) and fails when a shared/ package exports something only
// tests, the bench or the development tooling use; testdata/hooked, a
// module with one hook of each kind, shows that check finds them. It has no
// code: the shape is the product.
package layout
