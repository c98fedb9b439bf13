package sgemm

// UsePortable switches the bf16 and int8 kernels to portable Go (on) or back
// to the CPU's assembly where it has the instructions (off). The portable
// kernels give the same bits as the assembly ones, more slowly: tests and
// CI's portable lane use them to run the bf16 and int8 paths on every CPU.
// BF16Native and I8Native report false while they are on. Call it only while
// no bf16 or int8 GEMM runs.
func UsePortable(on bool) {
	bf16Asm = !on && bf16AsmAvailable()
	i8Asm = !on && i8AsmAvailable()
}
