//go:build !race

package demo

const raceBuild = false
