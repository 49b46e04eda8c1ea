//go:build !linux

package localpg

// memoryDir returns "": only Linux is known to offer a tmpfs at /dev/shm.
func memoryDir() string { return "" }
