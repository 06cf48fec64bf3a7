"""The filesystems a run measures: biofs with the toggle at one value, ext4 on a loop device."""
import os

from biofs_tools import LoopExt4, run, umount

from .fio import fio_layout


class Mount:
    """biofs on cfg.device at cfg.mnt with the toggle at `value`: a mount option, or as dev.NAME
    an option of the device string (emu:IMG,inline=on)."""

    def __init__(self, cfg, value):
        self.cfg, self.value = cfg, value

    def __enter__(self):
        device, opts = self.cfg.device, [self.cfg.mount_opts] if self.cfg.mount_opts else []
        if self.cfg.toggle.startswith("dev."):  # an option of the device string (emu:IMG,inline=on)
            device += f",{self.cfg.toggle[4:]}={self.value}"
        else:
            opts.insert(0, f"{self.cfg.toggle}={self.value}")
        run([os.path.join(self.cfg.bin, "biofs"), device, self.cfg.mnt] + (["-o", ",".join(opts)] if opts else []))
        return self

    def __exit__(self, *exc):
        umount(self.cfg.mnt)


class Ext4(LoopExt4):
    """ext4 on a loop device over an image the size of the biofs device, the cells' files laid
    out; direct I/O on the backing file unless --buffered."""

    def __init__(self, cfg):
        super().__init__(cfg.work + "/ext4.img", cfg.work + "/ext4.mnt", cfg.device_bytes,
                         direct_io=not cfg.buffered)
        self.cfg = cfg

    def setup(self):
        super().setup()
        fio_layout(self.mnt, max(self.cfg.numjobs), self.cfg.file_size)
