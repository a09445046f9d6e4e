//go:build race

package report

// raceEnabled is true under the race detector, which makes the calibration's
// bootstrap loops several times slower.
const raceEnabled = true
