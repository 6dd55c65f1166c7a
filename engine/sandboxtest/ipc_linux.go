//go:build linux

package sandboxtest

import "syscall"

// removeSysV removes the SysV objects with key from this host's IPC namespace, so a failing
// run of sysvIPC leaves nothing behind.
func removeSysV(key int) {
	const ipcRMID = 0
	if id, _, e := syscall.Syscall(syscall.SYS_SHMGET, uintptr(key), 0, 0); e == 0 {
		syscall.Syscall(syscall.SYS_SHMCTL, id, ipcRMID, 0)
	}
	if id, _, e := syscall.Syscall(syscall.SYS_MSGGET, uintptr(key), 0, 0); e == 0 {
		syscall.Syscall(syscall.SYS_MSGCTL, id, ipcRMID, 0)
	}
	if id, _, e := syscall.Syscall(syscall.SYS_SEMGET, uintptr(key), 0, 0); e == 0 {
		syscall.Syscall6(syscall.SYS_SEMCTL, id, 0, ipcRMID, 0, 0, 0)
	}
}
