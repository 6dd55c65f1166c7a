/* ProcessPrng for Wine 8 (Debian 12's wine64), which has no bcryptprimitives.dll: the Go
 * runtime (1.24 and later) loads it at start-up and stops without it. CI builds this with
 * Debian's mingw-w64 into the Wine prefix's system32 (.ci/run); it is never shipped. It fills
 * the buffer from RtlGenRandom (advapi32's SystemFunction036), which Wine implements. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG n = length > 0x10000000 ? 0x10000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}
