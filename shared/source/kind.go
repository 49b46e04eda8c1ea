package source

import (
	"encoding/json"
	"sort"
	"strconv"
)

// A kind is defined whole in its own file (stripe.go, standard.go, ...):
// its Kind constant, options, verifier, signer and sample event, and an
// init function that registers it. There is no list of kinds to keep in
// step: Kinds, Parse and the tests that check every kind read the registry.

// kindVerifier is what a kind's builder makes: a Verifier that also signs
// as the kind's sender does and makes the kind's sample event. Asking for
// it in the builder's result type makes a kind without a signer or a
// sample fail to compile, not fail at run time in `make dev` or a
// benchmark, nor borrow another kind's sample.
type kindVerifier interface {
	Verifier
	Signer
	sampleMaker
}

// builder makes a kind's verifier from one source's JSON options.
type builder func(name string, raw json.RawMessage) (kindVerifier, error)

// registry holds every kind's builder by kind name. Kinds add themselves
// from their file's init; nothing writes it after package initialisation,
// so reading it needs no lock.
var registry = map[string]builder{}

// register adds a kind. It is called from the kind's file's init function;
// a kind without a name or a builder, or registered twice, is a
// programming error that stops the program at start-up.
func register(kind string, build builder) {
	switch {
	case kind == "" || build == nil:
		panic("source: register needs a kind name and a builder")
	case registry[kind] != nil:
		panic("source: kind " + strconv.Quote(kind) + " is registered twice")
	}
	registry[kind] = build
}

// Kinds returns the supported source kinds, sorted.
func Kinds() []string {
	kinds := make([]string, 0, len(registry))
	for k := range registry {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}
