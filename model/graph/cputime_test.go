package graph

import "rgcpred/base/cputime"

// processCPU returns the process's CPU time in seconds (0 where it is not
// measured): with other processes on the cores, rates per CPU-second stay
// meaningful where rates per wall-second do not.
func processCPU() float64 { return cputime.Process().Seconds() }
