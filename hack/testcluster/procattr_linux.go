package main

import "syscall"

// childProcAttr makes the kernel SIGKILL a component when the supervisor dies, even by SIGKILL.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
