//! A hand-driven NBD client over a raw TCP socket, for the handshake and request sequences
//! no well-behaved client sends.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// The 28 bytes of a request header (NBD_REQUEST_MAGIC, then the fields, big-endian).
pub fn request_header(flags: u16, command: u16, cookie: u64, offset: u64, length: u32) -> [u8; 28] {
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&0x2560_9513u32.to_be_bytes());
    h[4..6].copy_from_slice(&flags.to_be_bytes());
    h[6..8].copy_from_slice(&command.to_be_bytes());
    h[8..16].copy_from_slice(&cookie.to_be_bytes());
    h[16..24].copy_from_slice(&offset.to_be_bytes());
    h[24..28].copy_from_slice(&length.to_be_bytes());
    h
}

/// A hand-driven NBD client over a raw TCP socket.
pub struct Raw {
    /// The socket.
    pub s: TcpStream,
}

/// The greeting's first magic ("NBDMAGIC").
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// The option magic ("IHAVEOPT").
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// The option reply magic.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;

impl Raw {
    /// Connect to `addr` (reads time out after 2 minutes).
    pub fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        // A safety net that turns a server bug into a failure instead of a hang.
        s.set_read_timeout(Some(std::time::Duration::from_secs(120))).expect("timeout");
        Raw { s }
    }

    /// Read a big-endian u16.
    pub fn u16(&mut self) -> u16 {
        let mut b = [0u8; 2];
        self.s.read_exact(&mut b).expect("read u16");
        u16::from_be_bytes(b)
    }
    /// Read a big-endian u32.
    pub fn u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.s.read_exact(&mut b).expect("read u32");
        u32::from_be_bytes(b)
    }
    /// Read a big-endian u64.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.s.read_exact(&mut b).expect("read u64");
        u64::from_be_bytes(b)
    }
    /// Read `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).expect("read bytes");
        b
    }
    /// Send `data`.
    pub fn send(&mut self, data: &[u8]) {
        self.s.write_all(data).expect("send");
    }

    /// Read the 18-byte greeting; returns the handshake flags.
    pub fn greeting(&mut self) -> u16 {
        assert_eq!(self.u64(), NBDMAGIC);
        assert_eq!(self.u64(), IHAVEOPT);
        self.u16()
    }

    /// Send option `option` with `data`.
    pub fn option(&mut self, option: u32, data: &[u8]) {
        let mut out = Vec::new();
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&option.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
        self.send(&out);
    }

    /// One option reply: (option, type, data).
    pub fn option_reply(&mut self) -> (u32, u32, Vec<u8>) {
        assert_eq!(self.u64(), REPLY_MAGIC);
        let option = self.u32();
        let kind = self.u32();
        let len = self.u32() as usize;
        (option, kind, self.bytes(len))
    }

    /// Handshake to transmission with NBD_OPT_GO; returns (size, transmission flags).
    pub fn go(addr: SocketAddr, name: &str, structured: bool) -> (Raw, u64, u16) {
        let mut raw = Raw::connect(addr);
        raw.greeting();
        raw.send(&3u32.to_be_bytes());
        if structured {
            raw.option(8, &[]);
            assert_eq!(raw.option_reply().1, 1, "structured replies acknowledged");
        }
        let mut data = Vec::new();
        data.extend_from_slice(&(name.len() as u32).to_be_bytes());
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        raw.option(7, &data);
        let (mut size, mut flags) = (0, 0);
        loop {
            let (_, kind, data) = raw.option_reply();
            match kind {
                3 if u16::from_be_bytes([data[0], data[1]]) == 0 => {
                    size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                    flags = u16::from_be_bytes([data[10], data[11]]);
                }
                3 => {}
                1 => break,
                other => panic!("NBD_OPT_GO failed with reply {other:#x}"),
            }
        }
        (raw, size, flags)
    }

    /// Send a request header and its payload.
    pub fn request(
        &mut self,
        flags: u16,
        command: u16,
        cookie: u64,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) {
        let mut out = Vec::with_capacity(28 + payload.len());
        out.extend_from_slice(&request_header(flags, command, cookie, offset, length));
        out.extend_from_slice(payload);
        self.send(&out);
    }

    /// Send a request (as [`Raw::request`]) and read its simple reply: (error, cookie).
    pub fn ask(
        &mut self,
        flags: u16,
        cmd: u16,
        cookie: u64,
        at: u64,
        len: u32,
        data: &[u8],
    ) -> (u32, u64) {
        self.request(flags, cmd, cookie, at, len, data);
        self.simple_reply()
    }

    /// A simple reply: (error, cookie).
    pub fn simple_reply(&mut self) -> (u32, u64) {
        assert_eq!(self.u32(), 0x6744_6698, "simple reply magic");
        (self.u32(), self.u64())
    }

    /// A structured chunk: (flags, type, cookie, payload).
    pub fn chunk(&mut self) -> (u16, u16, u64, Vec<u8>) {
        assert_eq!(self.u32(), 0x668e_33ef, "structured reply magic");
        let flags = self.u16();
        let kind = self.u16();
        let cookie = self.u64();
        let len = self.u32() as usize;
        (flags, kind, cookie, self.bytes(len))
    }

    /// Whether the server has closed the connection (reads hit EOF or a reset).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }
}
