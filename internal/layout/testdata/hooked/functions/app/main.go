// Command app is the hooked module's product: what it links is what the
// export check counts as used.
package main

import (
	"fmt"

	"example.com/hooked/shared/thing"
)

func main() {
	t := thing.New(thing.Config{Name: "app", Mode: thing.ModeFast})
	t.Wait(0)
	fmt.Println(t)
}
