//go:build race

package demo

// raceBuild is true under the race detector, which makes the virtual-time
// demo runs several times slower.
const raceBuild = true
