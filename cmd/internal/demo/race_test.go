//go:build race

package demo

// raceEnabled is true under the race detector, which makes the virtual-time
// demo runs several times slower.
const raceEnabled = true
