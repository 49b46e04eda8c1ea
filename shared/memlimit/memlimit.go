// Package memlimit gives a Lambda function's Go runtime a soft memory limit
// (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets) that follows the
// function's configured memory, so the garbage collector works harder as
// the heap nears what Lambda allows instead of letting it grow until Lambda
// kills the sandbox. Without a limit the collector paces itself on GOGC
// alone: the heap may reach twice the live data before a cycle, and a
// processor holding a batch of large bodies gets killed (Runtime.OutOfMemory)
// where a collection would have freed enough.
//
// It is standard library only, so every main may call it first.
package memlimit

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// The variables it reads: Lambda sets EnvFunctionMemory in every sandbox;
// EnvGoMemLimit is the Go runtime's own, which wins when set.
const (
	EnvFunctionMemory = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
	EnvGoMemLimit     = "GOMEMLIMIT"
)

// The headroom left outside the limit, for what the Go runtime does not
// count and Lambda does: the binary's own pages once read (about 13 MB for
// each of the functions, arm64, stripped), kernel socket buffers, the
// runtime's memory not yet returned to the system. A tenth of the memory,
// and never less than MinHeadroom: a 128 MB function gets 104 MiB, a 256 MB
// one 230 MiB. The limit is soft: a little too low only costs collections,
// too high costs the sandbox.
const (
	HeadroomPercent = 10
	MinHeadroom     = 24 << 20
)

// Limit returns the memory limit, in bytes, for a function of mb megabytes.
// Lambda's megabytes are binary (its GB-second counts 1,024 MB as a GB).
func Limit(mb int64) int64 {
	total := mb << 20
	return total - max(total*HeadroomPercent/100, MinHeadroom)
}

// FromEnv returns the limit Apply would set: ok is false when GOMEMLIMIT
// is set (the operator's choice stands, and the runtime already applied
// it) or when the process is not in Lambda. A memory size that is not a
// number of megabytes above the headroom is an error.
func FromEnv(getenv func(string) string) (limit int64, ok bool, err error) {
	if getenv(EnvGoMemLimit) != "" {
		return 0, false, nil
	}
	v := getenv(EnvFunctionMemory)
	if v == "" {
		return 0, false, nil
	}
	mb, err := strconv.ParseInt(v, 10, 64)
	if err != nil || Limit(mb) <= 0 {
		return 0, false, fmt.Errorf("%s=%q is not a memory size in megabytes", EnvFunctionMemory, v)
	}
	return Limit(mb), true, nil
}

// Apply sets the runtime's memory limit from the function's memory when
// GOMEMLIMIT is not set, and returns the limit set (0 when none). Mains
// call it first, at init; on an error they keep the runtime's default and
// say so, since a limit is an optimisation, not a requirement.
func Apply(getenv func(string) string) (int64, error) {
	limit, ok, err := FromEnv(getenv)
	if !ok {
		return 0, err
	}
	debug.SetMemoryLimit(limit)
	return limit, nil
}
