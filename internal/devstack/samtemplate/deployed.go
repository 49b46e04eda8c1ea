package samtemplate

import "strings"

// Lookup gives what a deployed stack knows of resource logicalID: its Ref
// (attribute "") or one of its attributes (Fn::GetAtt's, or
// "Endpoint.Address"). logicalID is the Ref's name as written, SAM's
// "Function.Version" included.
type Lookup func(logicalID, attribute string) (string, bool)

// MissingError names, in the order met, each value the lookup of
// ResolveDeployed did not give, as the template refers to it ("Ref
// Queue", "Fn::GetAtt Queue.Arn", "Fn::Sub ${Queue.Arn}"), and each
// function only CloudFormation evaluates ("Fn::GetAZs").
type MissingError struct {
	Missing []string
}

func (e *MissingError) Error() string {
	return "no deployed value for " + strings.Join(e.Missing, ", ")
}

// ResolveDeployed finishes v, a value of the stack (Resources, Outputs),
// with what only a deployed stack knows, given by lookup: a resource's Ref,
// a Fn::GetAtt, and the Fn::Sub, Fn::Join, Fn::Select and Fn::Split over
// them that Resolve left in their long form. What lookup does not give
// stays in its long form, and the error is a *MissingError naming it.
//
// It runs on a copy of the stack, which shares its decided conditions: it
// must not run concurrently with another evaluation of s.
func (s *Stack) ResolveDeployed(v any, lookup Lookup) (any, error) {
	d := *s
	d.deployed = lookup
	d.missing = new([]string)
	r, err := d.Resolve(v)
	if err != nil {
		return nil, err
	}
	if len(*d.missing) > 0 {
		return r, &MissingError{Missing: *d.missing}
	}
	return r, nil
}
