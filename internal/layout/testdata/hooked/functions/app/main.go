// Command app is the hooked module's product: what it links is what the
// export check counts as used.
package main

import (
	"fmt"

	"example.com/hooked/shared/thing"
)

func main() {
	cfg, err := thing.ConfigFromEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.Name, cfg.Mode = "app", thing.ModeFast
	t := thing.New(cfg)
	t.Wait(0)
	fmt.Println(t)
}
