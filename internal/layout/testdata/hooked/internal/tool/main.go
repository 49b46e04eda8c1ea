// Command tool is development tooling: what it alone uses is not the
// product's.
package main

import (
	"fmt"

	"example.com/hooked/shared/thing"
)

func main() {
	fmt.Println(thing.New(thing.Config{Name: "tool"}).Dump())
}
