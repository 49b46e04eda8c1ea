package source

import (
	"sort"
	"testing"
)

// Kinds lists exactly the registered kinds, sorted, and a registration that
// would make two kinds share a name (or a nameless kind) stops the program.
// Neither panicking call writes to the registry.
func TestRegistry(t *testing.T) {
	t.Parallel()
	kinds := Kinds()
	if len(kinds) != len(registry) || !sort.StringsAreSorted(kinds) {
		t.Fatalf("Kinds() = %v for %d registered kinds", kinds, len(registry))
	}
	for _, k := range kinds {
		if registry[k] == nil {
			t.Errorf("Kinds() lists %q, which has no builder", k)
		}
	}
	for _, tt := range []struct {
		name  string
		kind  string
		build builder
	}{
		{"twice", KindStripe, newStripe},
		{"no name", "", newStripe},
		{"no builder", "nobuilder", nil},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: register did not panic", tt.name)
				}
			}()
			register(tt.kind, tt.build)
		}()
	}
}
