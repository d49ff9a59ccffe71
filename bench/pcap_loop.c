// SPDX-License-Identifier: GPL-2.0-or-later
// The benchmark's floor: a bare libpcap loop that reads every packet of a capture and touches
// its first byte, nothing else. Prints "packets bytes".
#include <pcap/pcap.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pcap_loop FILE\n");
    return 2;
  }
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(argv[1], PCAP_TSTAMP_PRECISION_NANO, err);
  if (!p) {
    fprintf(stderr, "pcap_loop: %s\n", err);
    return 2;
  }
  struct pcap_pkthdr* h;
  const unsigned char* d;
  unsigned long long packets = 0, bytes = 0, sum = 0;
  int rc;
  while ((rc = pcap_next_ex(p, &h, &d)) == 1) {
    ++packets;
    bytes += h->caplen;
    sum += h->caplen ? d[0] : 0;  // touch the data so the loop is not just header walking
  }
  pcap_close(p);
  printf("%llu %llu %llu\n", packets, bytes, sum & 1);
  return rc == PCAP_ERROR ? 1 : 0;
}
