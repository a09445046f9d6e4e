//go:build race

package report

// raceBuild is true under the race detector, which makes the calibration's
// bootstrap loops several times slower.
const raceBuild = true
