//go:build !race

package report

const raceBuild = false
